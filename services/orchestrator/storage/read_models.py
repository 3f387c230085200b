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


EventKey = tuple[str, str, str, str]  # organization, project, environment, event type


@dataclass(frozen=True)
class Routes:
    """Where a batch of events goes: each known tenant's plan, and the workflows each
    (tenant, environment, type) starts."""

    plans: dict[tuple[str, str], str]
    workflows: dict[EventKey, list[RunnableWorkflow]]


async def routes(conn: Conn, keys: set[EventKey]) -> Routes:
    """The plans and ``matching`` workflows of every key, in one round trip."""
    if not keys:
        return Routes({}, {})
    orgs, projects, environments, types = (list(column) for column in zip(*keys, strict=True))
    cur = await conn.execute(
        "SELECT want.org, want.project, want.environment, want.type, t.plan,"
        " w.workflow_id, w.version, w.definition"
        " FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[])"
        "   AS want(org, project, environment, type)"
        " JOIN orchestrator.tenants t"
        "   ON t.organization_id = want.org AND t.project_id = want.project"
        " LEFT JOIN orchestrator.workflows w ON w.organization_id = want.org"
        "   AND w.project_id = want.project AND w.environment = want.environment"
        "   AND w.trigger_event = want.type AND w.status = 'active' AND w.version IS NOT NULL"
        " ORDER BY w.workflow_id",
        (orgs, projects, environments, types),
    )
    found = Routes({}, {})
    for row in await cur.fetchall():
        key = (row["org"], row["project"], row["environment"], row["type"])
        found.plans[key[:2]] = row["plan"]
        workflows = found.workflows.setdefault(key, [])
        if row["workflow_id"] is not None:
            workflow = RunnableWorkflow(row["workflow_id"], row["version"], row["definition"])
            workflows.append(workflow)
    return found


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
