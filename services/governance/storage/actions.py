"""Actions, versions and review history in PostgreSQL.

Methods take the caller's connection so a use case (upload: create the
action, write the version, record the review event, enqueue state) commits
as one transaction.
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
class ActionRow:
    id: uuid.UUID
    organization_id: str
    name: str
    description: str
    enabled: bool
    revision: int
    create_time: datetime
    update_time: datetime


@dataclass(frozen=True)
class VersionRow:
    action_id: uuid.UUID
    version: int
    sha256: str
    size_bytes: int
    permissions: list[str]
    review_status: str
    review_comment: str
    reviewed_by: str
    review_time: datetime | None
    uploaded_by: str
    signature_status: str
    key_fingerprint: str
    create_time: datetime


@dataclass(frozen=True)
class ReviewRow:
    version: int
    from_status: str
    to_status: str
    comment: str
    actor: str
    create_time: datetime


_VERSION_COLUMNS = (
    "action_id, version, sha256, size_bytes, permissions, review_status, review_comment,"
    " reviewed_by, review_time, uploaded_by, signature_status, key_fingerprint, create_time"
)


class ActionStore:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    def transaction(self) -> AbstractAsyncContextManager[Conn]:
        return transaction(self._pool)

    async def find(
        self, conn: Conn, organization_id: str, ref: str, *, lock: bool = False
    ) -> ActionRow | None:
        """By id or name, within one organization."""
        by_id = _as_uuid(ref)
        cur = await conn.execute(
            "SELECT * FROM governance.actions WHERE organization_id = %s"
            " AND (name = %s OR id = %s)" + (" FOR UPDATE" if lock else ""),
            (organization_id, ref, by_id),
        )
        row = await cur.fetchone()
        return ActionRow(**row) if row else None

    async def create(
        self, conn: Conn, organization_id: str, name: str, description: str
    ) -> ActionRow:
        """Insert, or lock and return the existing action of that name."""
        await conn.execute(
            "INSERT INTO governance.actions (id, organization_id, name, description)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT (organization_id, name) DO NOTHING",
            (uuid.uuid4(), organization_id, name, description),
        )
        found = await self.find(conn, organization_id, name, lock=True)
        assert found is not None
        return found

    async def update(self, conn: Conn, action_id: uuid.UUID, **changes: Any) -> ActionRow:
        """Apply changes and bump the revision (every change is a new state record)."""
        sets = "".join(f"{column} = %s, " for column in changes)
        cur = await conn.execute(
            f"UPDATE governance.actions SET {sets}revision = revision + 1,"
            " update_time = now() WHERE id = %s RETURNING *",
            (*changes.values(), action_id),
        )
        return ActionRow(**await cur.fetchone())  # type: ignore[arg-type]

    async def delete(self, conn: Conn, action_id: uuid.UUID) -> None:
        await conn.execute("DELETE FROM governance.actions WHERE id = %s", (action_id,))

    async def list_actions(
        self, conn: Conn, organization_id: str, after: str | None, limit: int
    ) -> list[ActionRow]:
        cur = await conn.execute(
            "SELECT * FROM governance.actions WHERE organization_id = %s AND name > %s"
            " ORDER BY name LIMIT %s",
            (organization_id, after or "", limit),
        )
        return [ActionRow(**r) for r in await cur.fetchall()]

    async def insert_version(
        self,
        conn: Conn,
        action_id: uuid.UUID,
        version: int,
        sha256: str,
        module: bytes,
        permissions: list[str],
        uploaded_by: str,
        signature_status: str,
        key_fingerprint: str,
    ) -> VersionRow:
        cur = await conn.execute(
            "INSERT INTO governance.action_versions (action_id, version, sha256, size_bytes,"
            " module, permissions, uploaded_by, signature_status, key_fingerprint)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
            f" RETURNING {_VERSION_COLUMNS}",
            (
                action_id,
                version,
                sha256,
                len(module),
                module,
                Jsonb(permissions),
                uploaded_by,
                signature_status,
                key_fingerprint,
            ),
        )
        return VersionRow(**await cur.fetchone())  # type: ignore[arg-type]

    async def versions(
        self, conn: Conn, action_id: uuid.UUID, before: int | None = None, limit: int = 1000
    ) -> list[VersionRow]:
        """Newest first."""
        cur = await conn.execute(
            f"SELECT {_VERSION_COLUMNS} FROM governance.action_versions"
            " WHERE action_id = %s AND version < %s ORDER BY version DESC LIMIT %s",
            (action_id, before if before is not None else 2**31 - 1, limit),
        )
        return [VersionRow(**r) for r in await cur.fetchall()]

    async def version(self, conn: Conn, action_id: uuid.UUID, number: int) -> VersionRow | None:
        cur = await conn.execute(
            f"SELECT {_VERSION_COLUMNS} FROM governance.action_versions"
            " WHERE action_id = %s AND version = %s",
            (action_id, number),
        )
        row = await cur.fetchone()
        return VersionRow(**row) if row else None

    async def module(self, conn: Conn, action_id: uuid.UUID, number: int) -> bytes:
        cur = await conn.execute(
            "SELECT module FROM governance.action_versions WHERE action_id = %s AND version = %s",
            (action_id, number),
        )
        row = await cur.fetchone()
        assert row is not None
        return bytes(row["module"])

    async def module_by_digest(self, conn: Conn, organization_id: str, sha256: str) -> bytes | None:
        cur = await conn.execute(
            "SELECT v.module FROM governance.action_versions v"
            " JOIN governance.actions a ON a.id = v.action_id"
            " WHERE a.organization_id = %s AND v.sha256 = %s LIMIT 1",
            (organization_id, sha256),
        )
        row = await cur.fetchone()
        return bytes(row["module"]) if row else None

    async def set_review(
        self,
        conn: Conn,
        action_id: uuid.UUID,
        number: int,
        status: str,
        comment: str,
        reviewer: str,
    ) -> VersionRow:
        cur = await conn.execute(
            "UPDATE governance.action_versions SET review_status = %s, review_comment = %s,"
            " reviewed_by = %s, review_time = now() WHERE action_id = %s AND version = %s"
            f" RETURNING {_VERSION_COLUMNS}",
            (status, comment, reviewer, action_id, number),
        )
        return VersionRow(**await cur.fetchone())  # type: ignore[arg-type]

    async def record_review(
        self,
        conn: Conn,
        action_id: uuid.UUID,
        number: int,
        from_status: str,
        to_status: str,
        comment: str,
        actor: str,
    ) -> None:
        await conn.execute(
            "INSERT INTO governance.review_events"
            " (action_id, version, from_status, to_status, comment, actor)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (action_id, number, from_status, to_status, comment, actor),
        )

    async def reviews(self, conn: Conn, action_id: uuid.UUID, number: int) -> list[ReviewRow]:
        cur = await conn.execute(
            "SELECT version, from_status, to_status, comment, actor, create_time"
            " FROM governance.review_events WHERE action_id = %s AND version = %s ORDER BY id",
            (action_id, number),
        )
        return [ReviewRow(**r) for r in await cur.fetchall()]


def _as_uuid(ref: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(ref)
    except ValueError:
        return None
