"""The usages read model: which actions each workflow's draft and published
version reference, kept from the registry's state topic."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

Conn = AsyncConnection[Any]


@dataclass(frozen=True)
class UsageRow:
    workflow_id: uuid.UUID
    organization_id: str
    project_id: str
    workflow_name: str
    workflow_status: str
    draft_refs: list[str]
    published_refs: list[str]
    revision: int


async def upsert(conn: Conn, usage: UsageRow) -> None:
    """Newer revisions win; a redelivered or older record changes nothing."""
    await conn.execute(
        "INSERT INTO governance.workflow_usages (workflow_id, organization_id, project_id,"
        " workflow_name, workflow_status, draft_refs, published_refs, revision)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (workflow_id) DO UPDATE SET workflow_name = excluded.workflow_name,"
        " workflow_status = excluded.workflow_status, draft_refs = excluded.draft_refs,"
        " published_refs = excluded.published_refs, revision = excluded.revision"
        " WHERE governance.workflow_usages.revision < excluded.revision",
        (
            usage.workflow_id,
            usage.organization_id,
            usage.project_id,
            usage.workflow_name,
            usage.workflow_status,
            usage.draft_refs,
            usage.published_refs,
            usage.revision,
        ),
    )


async def remove(conn: Conn, workflow_id: uuid.UUID) -> None:
    await conn.execute(
        "DELETE FROM governance.workflow_usages WHERE workflow_id = %s", (workflow_id,)
    )


async def referencing(conn: Conn, organization_id: str, refs: list[str]) -> list[UsageRow]:
    """Workflows whose draft or published version names any of ``refs``.

    Archived workflows never run again, so they do not pin an action.
    """
    cur = await conn.execute(
        "SELECT * FROM governance.workflow_usages WHERE organization_id = %s"
        " AND workflow_status <> 'archived'"
        " AND (draft_refs && %s OR published_refs && %s) ORDER BY workflow_name, workflow_id",
        (organization_id, refs, refs),
    )
    return [UsageRow(**r) for r in await cur.fetchall()]
