"""Workflows and their versions in PostgreSQL.

Methods take the connection of the caller's transaction, so one use case
(publish: lock, write version, bump status, enqueue state record) commits
or rolls back as a whole.
"""

from __future__ import annotations

import uuid
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from libs.db import transaction

Conn = AsyncConnection[Any]


@dataclass(frozen=True)
class WorkflowRow:
    id: uuid.UUID
    organization_id: str
    project_id: str
    status: str
    draft: dict[str, Any]
    draft_hash: str
    published_version: int
    # Bumped on every change; orders the records of the state topic.
    revision: int
    create_time: datetime
    update_time: datetime


@dataclass(frozen=True)
class VersionRow:
    workflow_id: uuid.UUID
    version: int
    definition: dict[str, Any]
    definition_hash: str
    message: str
    created_by: str
    create_time: datetime


@dataclass(frozen=True)
class WorkflowFilter:
    organization_id: str
    project_id: str | None
    environment: str = ""
    status: str = ""
    trigger_event: str = ""


_WORKFLOW_COLUMNS = (
    "id, organization_id, project_id, status, draft, draft_hash, published_version, revision,"
    " create_time, update_time"
)


class WorkflowStore:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    def transaction(self) -> AbstractAsyncContextManager[Conn]:
        return transaction(self._pool)

    async def insert(
        self,
        conn: Conn,
        organization_id: str,
        project_id: str,
        draft: dict[str, Any],
        draft_hash: str,
    ) -> WorkflowRow:
        cur = await conn.execute(
            "INSERT INTO registry.workflows (id, organization_id, project_id, name, trigger_event,"
            " environment, status, draft, draft_hash, revision)"
            f" VALUES (%s, %s, %s, %s, %s, %s, 'draft', %s, %s, 1) RETURNING {_WORKFLOW_COLUMNS}",
            (
                uuid.uuid4(),
                organization_id,
                project_id,
                draft["name"],
                draft["trigger_event"],
                draft["environment"],
                Jsonb(draft),
                draft_hash,
            ),
        )
        return WorkflowRow(**await cur.fetchone())  # type: ignore[arg-type]

    async def get(
        self, conn: Conn, organization_id: str, workflow_id: uuid.UUID, *, lock: bool = False
    ) -> WorkflowRow | None:
        cur = await conn.execute(
            f"SELECT {_WORKFLOW_COLUMNS} FROM registry.workflows"
            " WHERE organization_id = %s AND id = %s" + (" FOR UPDATE" if lock else ""),
            (organization_id, workflow_id),
        )
        row = await cur.fetchone()
        return WorkflowRow(**row) if row else None

    async def list_workflows(
        self, conn: Conn, where: WorkflowFilter, after: tuple[str, str] | None, limit: int
    ) -> list[WorkflowRow]:
        clauses, params = ["organization_id = %s"], [where.organization_id]
        for column in ("project_id", "environment", "status", "trigger_event"):
            value = getattr(where, column)
            if value:
                clauses.append(f"{column} = %s")
                params.append(value)
        if after is not None:
            clauses.append("(create_time, id) > (%s::timestamptz, %s::uuid)")
            params.extend(after)
        cur = await conn.execute(
            f"SELECT {_WORKFLOW_COLUMNS} FROM registry.workflows WHERE {' AND '.join(clauses)}"
            " ORDER BY create_time, id LIMIT %s",
            (*params, limit),
        )
        return [WorkflowRow(**r) for r in await cur.fetchall()]

    async def save_draft(
        self, conn: Conn, workflow_id: uuid.UUID, draft: dict[str, Any], draft_hash: str
    ) -> WorkflowRow:
        cur = await conn.execute(
            "UPDATE registry.workflows SET draft = %s, draft_hash = %s, name = %s,"
            " trigger_event = %s, environment = %s, revision = revision + 1, update_time = now()"
            f" WHERE id = %s RETURNING {_WORKFLOW_COLUMNS}",
            (
                Jsonb(draft),
                draft_hash,
                draft["name"],
                draft["trigger_event"],
                draft["environment"],
                workflow_id,
            ),
        )
        return WorkflowRow(**await cur.fetchone())  # type: ignore[arg-type]

    async def set_state(
        self, conn: Conn, workflow_id: uuid.UUID, status: str, published_version: int
    ) -> WorkflowRow:
        """Change runnable state; bumps the revision that orders state records."""
        cur = await conn.execute(
            "UPDATE registry.workflows SET status = %s, published_version = %s,"
            " revision = revision + 1, update_time = now()"
            f" WHERE id = %s RETURNING {_WORKFLOW_COLUMNS}",
            (status, published_version, workflow_id),
        )
        return WorkflowRow(**await cur.fetchone())  # type: ignore[arg-type]

    async def delete(self, conn: Conn, workflow_id: uuid.UUID) -> None:
        await conn.execute("DELETE FROM registry.workflows WHERE id = %s", (workflow_id,))

    async def insert_version(
        self,
        conn: Conn,
        workflow_id: uuid.UUID,
        version: int,
        definition: dict[str, Any],
        definition_hash: str,
        message: str,
        created_by: str,
    ) -> VersionRow:
        cur = await conn.execute(
            "INSERT INTO registry.workflow_versions"
            " (workflow_id, version, definition, definition_hash, message, created_by)"
            " VALUES (%s, %s, %s, %s, %s, %s) RETURNING *",
            (workflow_id, version, Jsonb(definition), definition_hash, message, created_by),
        )
        return VersionRow(**await cur.fetchone())  # type: ignore[arg-type]

    async def get_version(
        self, conn: Conn, workflow_id: uuid.UUID, version: int
    ) -> VersionRow | None:
        cur = await conn.execute(
            "SELECT * FROM registry.workflow_versions WHERE workflow_id = %s AND version = %s",
            (workflow_id, version),
        )
        row = await cur.fetchone()
        return VersionRow(**row) if row else None

    async def list_versions(
        self, conn: Conn, workflow_id: uuid.UUID, before: int | None, limit: int
    ) -> list[VersionRow]:
        cur = await conn.execute(
            "SELECT * FROM registry.workflow_versions WHERE workflow_id = %s AND version < %s"
            " ORDER BY version DESC LIMIT %s",
            (workflow_id, before if before is not None else 2**31 - 1, limit),
        )
        return [VersionRow(**r) for r in await cur.fetchall()]
