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


# Why the instance aliased `i` may not start a step: the scope of a hold over it,
# and its workflow's status (registry `paused` = disabled). One round trip with the lock.
BOUNDARY_COLUMNS = (
    "(SELECT h.scope FROM orchestrator.holds h WHERE h.organization_id = i.organization_id"
    " AND (h.project_id = '' OR h.project_id = i.project_id)"
    " AND (h.subject = '' OR h.subject = i.subject)"
    " ORDER BY h.project_id, h.subject LIMIT 1) AS hold_scope,"
    " (SELECT w.status FROM orchestrator.workflows w WHERE w.workflow_id = i.workflow_id)"
    " AS workflow_status"
)


def hold_reason(hold_scope: str | None, workflow_status: str | None) -> str | None:
    """A hold's scope, 'workflow' for a disabled workflow, or None: free to run."""
    if hold_scope is not None:
        return hold_scope
    return "workflow" if workflow_status == "paused" else None


async def holding(conn: Conn, instance_id: uuid.UUID) -> str | None:
    """Why an instance may not start its next step now, or None."""
    cur = await conn.execute(
        f"SELECT {BOUNDARY_COLUMNS} FROM orchestrator.instances i WHERE i.id = %s",
        (instance_id,),
    )
    row = await cur.fetchone()
    return hold_reason(row["hold_scope"], row["workflow_status"]) if row else None
