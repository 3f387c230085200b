"""Holds: scopes paused by an operator. Instances in a held scope do not start a step."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection

Conn = AsyncConnection[Any]


@dataclass(frozen=True)
class Scope:
    """One of: a subject in a project, a project, an organization ('' = not narrowed)."""

    organization_id: str
    project_id: str = ""
    subject: str = ""

    @property
    def kind(self) -> str:
        if self.subject:
            return "subject"
        return "project" if self.project_id else "organization"


@dataclass(frozen=True)
class HoldRow:
    organization_id: str
    project_id: str
    subject: str
    scope: str
    created_by: str
    create_time: datetime


async def place(conn: Conn, scope: Scope, created_by: str) -> HoldRow:
    cur = await conn.execute(
        "INSERT INTO orchestrator.holds (organization_id, project_id, subject, scope, created_by)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (organization_id, project_id, subject)"
        " DO UPDATE SET scope = excluded.scope RETURNING *",
        (scope.organization_id, scope.project_id, scope.subject, scope.kind, created_by),
    )
    return HoldRow(**await cur.fetchone())  # type: ignore[arg-type]


async def lift(conn: Conn, scope: Scope) -> bool:
    cur = await conn.execute(
        "DELETE FROM orchestrator.holds"
        " WHERE organization_id = %s AND project_id = %s AND subject = %s",
        (scope.organization_id, scope.project_id, scope.subject),
    )
    return cur.rowcount > 0


async def in_organization(conn: Conn, organization_id: str) -> list[HoldRow]:
    cur = await conn.execute(
        "SELECT * FROM orchestrator.holds WHERE organization_id = %s"
        " ORDER BY create_time, project_id, subject",
        (organization_id,),
    )
    return [HoldRow(**r) for r in await cur.fetchall()]


async def holding(
    conn: Conn, organization_id: str, project_id: str, subject: str | None, workflow: uuid.UUID
) -> str | None:
    """Why an instance may not start its next step now (a hold's scope, 'workflow'), or None."""
    cur = await conn.execute(
        "SELECT (SELECT scope FROM orchestrator.holds WHERE organization_id = %s"
        "   AND (project_id = '' OR project_id = %s) AND (subject = '' OR subject = %s)"
        "   ORDER BY project_id, subject LIMIT 1) AS hold,"
        " (SELECT status FROM orchestrator.workflows WHERE workflow_id = %s) AS workflow",
        (organization_id, project_id, subject, workflow),
    )
    row = await cur.fetchone()
    assert row is not None
    if row["hold"] is not None:
        return str(row["hold"])
    # Registry status `paused` is a disabled workflow: its runs hold until it is enabled.
    return "workflow" if row["workflow"] == "paused" else None
