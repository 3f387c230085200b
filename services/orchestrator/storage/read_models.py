"""Read models of the registry's state: active workflows and known tenants.

Fed from the registry's compacted topics (never its tables). A record is
applied only if its revision is newer than the one held, so redelivery and
reordering cannot roll state back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

Conn = AsyncConnection[Any]


@dataclass(frozen=True)
class RunnableWorkflow:
    workflow_id: uuid.UUID
    version: int
    definition: dict[str, Any]


async def apply_workflow(
    conn: Conn,
    workflow_id: uuid.UUID,
    organization_id: str,
    project_id: str,
    environment: str,
    status: str,
    version: int | None,
    definition: dict[str, Any] | None,
    revision: int,
    draft: dict[str, Any] | None = None,
) -> None:
    await conn.execute(
        "INSERT INTO orchestrator.workflows (workflow_id, organization_id, project_id,"
        " environment, status, trigger_event, version, definition, revision, draft_definition)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (workflow_id) DO UPDATE SET status = excluded.status,"
        " environment = excluded.environment, trigger_event = excluded.trigger_event,"
        " version = excluded.version, definition = excluded.definition,"
        " revision = excluded.revision, draft_definition = excluded.draft_definition"
        " WHERE orchestrator.workflows.revision < excluded.revision",
        (
            workflow_id,
            organization_id,
            project_id,
            environment,
            status,
            definition["trigger_event"] if definition else None,
            version,
            Jsonb(definition) if definition is not None else None,
            revision,
            Jsonb(draft) if draft is not None else None,
        ),
    )


async def remove_workflow(conn: Conn, workflow_id: uuid.UUID) -> None:
    await conn.execute("DELETE FROM orchestrator.workflows WHERE workflow_id = %s", (workflow_id,))


async def matching(
    conn: Conn, organization_id: str, project_id: str, environment: str, event_type: str
) -> list[RunnableWorkflow]:
    """Active published workflows of exactly this tenant and environment for this type."""
    cur = await conn.execute(
        "SELECT workflow_id, version, definition FROM orchestrator.workflows"
        " WHERE organization_id = %s AND project_id = %s AND environment = %s"
        " AND trigger_event = %s AND status = 'active' AND version IS NOT NULL"
        " ORDER BY workflow_id",
        (organization_id, project_id, environment, event_type),
    )
    return [RunnableWorkflow(**r) for r in await cur.fetchall()]


async def workflow_status(conn: Conn, workflow_id: uuid.UUID) -> str | None:
    cur = await conn.execute(
        "SELECT status FROM orchestrator.workflows WHERE workflow_id = %s", (workflow_id,)
    )
    row = await cur.fetchone()
    return str(row["status"]) if row else None


async def apply_tenant(
    conn: Conn, organization_id: str, project_id: str, plan: str, revision: int
) -> None:
    await conn.execute(
        "INSERT INTO orchestrator.tenants (organization_id, project_id, plan, revision)"
        " VALUES (%s, %s, %s, %s) ON CONFLICT (organization_id, project_id) DO UPDATE"
        " SET plan = excluded.plan, revision = excluded.revision"
        " WHERE orchestrator.tenants.revision < excluded.revision",
        (organization_id, project_id, plan, revision),
    )


async def plans_for(conn: Conn, tenants: set[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The plan of each known (organization, project) among ``tenants``."""
    if not tenants:
        return {}
    orgs, projects = zip(*sorted(tenants), strict=True)
    cur = await conn.execute(
        "SELECT t.organization_id, t.project_id, t.plan FROM orchestrator.tenants t"
        " JOIN unnest(%s::text[], %s::text[]) AS want(org, project)"
        " ON t.organization_id = want.org AND t.project_id = want.project",
        (list(orgs), list(projects)),
    )
    rows = await cur.fetchall()
    return {(r["organization_id"], r["project_id"]): r["plan"] for r in rows}


@dataclass(frozen=True)
class WorkflowRecord:
    """One workflow as the orchestrator knows it: published version and current draft."""

    workflow_id: uuid.UUID
    organization_id: str
    project_id: str
    environment: str
    status: str
    version: int | None
    definition: dict[str, Any] | None
    draft_definition: dict[str, Any] | None


async def workflow_of(
    conn: Conn, organization_id: str, workflow_id: uuid.UUID
) -> WorkflowRecord | None:
    """The organization's workflow with this id; another organization's is None."""
    cur = await conn.execute(
        "SELECT workflow_id, organization_id, project_id, environment, status, version,"
        " definition, draft_definition FROM orchestrator.workflows"
        " WHERE organization_id = %s AND workflow_id = %s",
        (organization_id, workflow_id),
    )
    row = await cur.fetchone()
    return WorkflowRecord(**row) if row else None
