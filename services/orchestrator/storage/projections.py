"""Projections: upserted by (tenant, environment, name, entity_type, entity_id), else appended."""

from __future__ import annotations

import uuid
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from services.orchestrator.storage.instances import InstanceRow

Conn = AsyncConnection[Any]


async def write(
    conn: Conn, instance: InstanceRow, step: int, projection: dict[str, Any]
) -> uuid.UUID:
    """Write in the caller's transaction (the step result's), so it happens once in effect."""
    keyed = projection.get("entity_type") is not None and projection.get("entity_id") is not None
    conflict = (
        " ON CONFLICT (organization_id, project_id, environment, name, entity_type, entity_id)"
        " WHERE entity_type IS NOT NULL DO UPDATE SET title = excluded.title,"
        " status = excluded.status, data = excluded.data, last_event = excluded.last_event,"
        " last_instance = excluded.last_instance, update_time = now()"
        if keyed
        else ""
    )
    cur = await conn.execute(
        "INSERT INTO orchestrator.projections (id, organization_id, project_id, environment,"
        " name, entity_type, entity_id, title, status, data, last_event, last_instance)"
        f" VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s){conflict} RETURNING id",
        (
            uuid.uuid4(),
            instance.organization_id,
            instance.project_id,
            instance.environment,
            projection["name"],
            projection.get("entity_type") if keyed else None,
            str(projection["entity_id"]) if keyed else None,
            projection.get("title") or "",
            projection.get("status") or "",
            Jsonb(projection.get("data")),
            instance.event,
            instance.id,
        ),
    )
    row = await cur.fetchone()
    assert row is not None
    return uuid.UUID(str(row["id"]))
