"""Projections (read models) and the history of their writes.

A keyed projection (entity_type and entity_id) is one row per (tenant,
environment, name, entity_type, entity_id), updated in place. An unkeyed one
is one row per (event, workflow, step): its id is derived from those, so a
replay or a redrive of the same event rewrites the row instead of adding one.
Every write also lands in ``projection_writes``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from services.orchestrator.storage.instances import InstanceRow

Conn = AsyncConnection[Any]

# Fixed forever: unkeyed rows' ids are derived from it.
APPENDED_ROWS = uuid.UUID("d2579c08-665a-4f80-9852-8357b82f8184")

_COLUMNS = (
    "id, organization_id, project_id, environment, name, entity_type, entity_id, title,"
    " status, data, last_event, last_event_id, last_instance, create_time, update_time"
)
_WRITE_COLUMNS = (
    "id, projection, event, event_id, instance_id, workflow_id, workflow_version, step,"
    " title, status, data, replay, write_time"
)
# clock_timestamp(), not now(): a writer that waited for the row lock writes
# after the one it waited for, even when its transaction began first.
_UPDATE = (
    " title = excluded.title, status = excluded.status, data = excluded.data,"
    " last_event = excluded.last_event, last_event_id = excluded.last_event_id,"
    " last_instance = excluded.last_instance, update_time = clock_timestamp()"
)
_ON_KEY = (
    " ON CONFLICT (organization_id, project_id, environment, name, entity_type, entity_id)"
    f" WHERE entity_type IS NOT NULL DO UPDATE SET{_UPDATE}"
)
_ON_ID = f" ON CONFLICT (id) DO UPDATE SET name = excluded.name,{_UPDATE}"


@dataclass(frozen=True)
class ProjectionRow:
    id: uuid.UUID
    organization_id: str
    project_id: str
    environment: str
    name: str
    entity_type: str | None
    entity_id: str | None
    title: str
    status: str
    data: Any
    last_event: uuid.UUID
    last_event_id: str
    last_instance: uuid.UUID
    create_time: datetime
    update_time: datetime


@dataclass(frozen=True)
class ProjectionWriteRow:
    id: int
    projection: uuid.UUID
    event: uuid.UUID
    event_id: str
    instance_id: uuid.UUID
    workflow_id: uuid.UUID
    workflow_version: int
    step: int
    title: str
    status: str
    data: Any
    replay: bool
    write_time: datetime


def appended_row_id(instance: InstanceRow, step: int) -> uuid.UUID:
    return uuid.uuid5(APPENDED_ROWS, f"{instance.event}:{instance.workflow_id}:{step}")


async def write(
    conn: Conn, instance: InstanceRow, step: int, projection: dict[str, Any]
) -> uuid.UUID:
    """Write in the caller's transaction (the step result's), so it happens once in effect.

    The executor has already refused a projection with only one entity half.
    """
    keyed = projection.get("entity_type") is not None and projection.get("entity_id") is not None
    title = projection.get("title") or ""
    status = projection.get("status") or ""
    data = Jsonb(projection.get("data"))
    # One statement: the row and its history entry, one round trip.
    cur = await conn.execute(
        "WITH written AS (INSERT INTO orchestrator.projections (id, organization_id,"
        " project_id, environment, name, entity_type, entity_id, title, status, data,"
        " last_event, last_event_id, last_instance)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        f"{_ON_KEY if keyed else _ON_ID} RETURNING id)"
        " INSERT INTO orchestrator.projection_writes (projection, event, event_id, instance_id,"
        " workflow_id, workflow_version, step, title, status, data, replay, write_time)"
        " SELECT written.id, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, clock_timestamp()"
        " FROM written RETURNING projection",
        (
            uuid.uuid4() if keyed else appended_row_id(instance, step),
            instance.organization_id,
            instance.project_id,
            instance.environment,
            projection["name"],
            projection["entity_type"] if keyed else None,
            str(projection["entity_id"]) if keyed else None,
            title,
            status,
            data,
            instance.event,
            instance.event_id,
            instance.id,
            instance.event,
            instance.event_id,
            instance.id,
            instance.workflow_id,
            instance.workflow_version,
            step,
            title,
            status,
            data,
            instance.run_key.startswith("replay:") or instance.skip_side_effects,
        ),
    )
    row = await cur.fetchone()
    assert row is not None
    return uuid.UUID(str(row["projection"]))


async def get(
    conn: Conn,
    organization_id: str,
    project_id: str,
    environment: str,
    name: str,
    entity_type: str,
    entity_id: str,
) -> ProjectionRow | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM orchestrator.projections WHERE organization_id = %s"
        " AND project_id = %s AND environment = %s AND name = %s AND entity_type = %s"
        " AND entity_id = %s",
        (organization_id, project_id, environment, name, entity_type, entity_id),
    )
    row = await cur.fetchone()
    return ProjectionRow(**row) if row else None


async def list_page(
    conn: Conn,
    organization_id: str,
    project_id: str,
    environment: str,
    name: str,
    entity_type: str,
    status: str,
    before: tuple[datetime, uuid.UUID] | None,
    limit: int,
) -> list[ProjectionRow]:
    """Newest update first; ``before`` is the (update_time, id) the last page ended on."""
    clauses = ["organization_id = %s", "project_id = %s", "environment = %s", "name = %s"]
    params: list[Any] = [organization_id, project_id, environment, name]
    for column, value in (("entity_type", entity_type), ("status", status)):
        if value:
            clauses.append(f"{column} = %s")
            params.append(value)
    if before is not None:
        clauses.append("(update_time, id) < (%s, %s)")
        params.extend(before)
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM orchestrator.projections WHERE {' AND '.join(clauses)}"
        " ORDER BY update_time DESC, id DESC LIMIT %s",
        (*params, limit),
    )
    return [ProjectionRow(**r) for r in await cur.fetchall()]


async def history_page(
    conn: Conn, projection_id: uuid.UUID, before: tuple[datetime, int] | None, limit: int
) -> list[ProjectionWriteRow]:
    """Newest write first; ``before`` is the (write_time, id) the last page ended on."""
    after_cursor = " AND (write_time, id) < (%s, %s)" if before else ""
    cur = await conn.execute(
        f"SELECT {_WRITE_COLUMNS} FROM orchestrator.projection_writes"
        f" WHERE projection = %s{after_cursor} ORDER BY write_time DESC, id DESC LIMIT %s",
        (projection_id, *(before or ()), limit),
    )
    return [ProjectionWriteRow(**r) for r in await cur.fetchall()]
