"""Emptying a project's sandbox: its events and everything that hangs off them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

Conn = AsyncConnection[Any]

# Children before parents: dead letters and instances reference events, and
# deleting an instance cascades to its log (timers are instance rows).
# Projections first, so whatever cascades from them goes before the rows
# they point at.
_TABLES = ("projections", "dead_letters", "instances", "events")


@dataclass(frozen=True)
class SandboxCounts:
    events: int
    instances: int
    dead_letters: int
    projections: int


async def delete_sandbox(conn: Conn, organization_id: str, project_id: str) -> SandboxCounts:
    """Delete every sandbox row of one project, in the caller's transaction."""
    tenant = (organization_id, project_id)
    # A worker writes a step's outcome (log, dead letter, projection) while
    # holding its instance's row lock. Taking those locks first waits out the
    # writes in flight; afterwards a worker finds the instance gone and stops.
    await conn.execute(
        "SELECT id FROM orchestrator.instances WHERE organization_id = %s AND project_id = %s"
        " AND environment = 'sandbox' ORDER BY id FOR UPDATE",
        tenant,
    )
    deleted = {}
    for table in _TABLES:
        cur = await conn.execute(
            f"DELETE FROM orchestrator.{table} WHERE organization_id = %s AND project_id = %s"
            " AND environment = 'sandbox'",
            tenant,
        )
        deleted[table] = cur.rowcount
    return SandboxCounts(
        events=deleted["events"],
        instances=deleted["instances"],
        dead_letters=deleted["dead_letters"],
        projections=deleted["projections"],
    )
