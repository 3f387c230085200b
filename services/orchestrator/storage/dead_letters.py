"""The dead-letter queue: events whose workflow failed for good."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection

Conn = AsyncConnection[Any]


@dataclass(frozen=True)
class DeadLetterRow:
    id: uuid.UUID
    organization_id: str
    project_id: str
    environment: str
    event: uuid.UUID
    event_id: str
    instance_id: uuid.UUID
    workflow_id: uuid.UUID
    workflow_version: int
    step: int
    step_name: str
    attempts: int
    reason: str
    error: str
    status: str
    redrive_instance_id: uuid.UUID | None
    create_time: datetime


async def insert(conn: Conn, **fields: Any) -> DeadLetterRow:
    columns = ", ".join(fields)
    marks = ", ".join(["%s"] * len(fields))
    cur = await conn.execute(
        f"INSERT INTO orchestrator.dead_letters (id, {columns}) VALUES (%s, {marks}) RETURNING *",
        (uuid.uuid4(), *fields.values()),
    )
    return DeadLetterRow(**await cur.fetchone())  # type: ignore[arg-type]


async def get(
    conn: Conn, organization_id: str, letter_id: uuid.UUID, *, lock: bool = False
) -> DeadLetterRow | None:
    cur = await conn.execute(
        "SELECT * FROM orchestrator.dead_letters WHERE organization_id = %s AND id = %s"
        + (" FOR UPDATE" if lock else ""),
        (organization_id, letter_id),
    )
    row = await cur.fetchone()
    return DeadLetterRow(**row) if row else None


async def set_status(
    conn: Conn, letter_id: uuid.UUID, status: str, redrive_instance_id: uuid.UUID | None = None
) -> DeadLetterRow:
    cur = await conn.execute(
        "UPDATE orchestrator.dead_letters SET status = %s,"
        " redrive_instance_id = coalesce(%s, redrive_instance_id) WHERE id = %s RETURNING *",
        (status, redrive_instance_id, letter_id),
    )
    return DeadLetterRow(**await cur.fetchone())  # type: ignore[arg-type]


async def list_page(
    conn: Conn,
    organization_id: str,
    project_id: str | None,
    workflow_id: uuid.UUID | None,
    reason: str,
    status: str,
    window: tuple[datetime | None, datetime | None],
    before: tuple[str, str] | None,
    limit: int,
) -> list[DeadLetterRow]:
    clauses, params = ["organization_id = %s"], [organization_id]
    for column, value in (
        ("project_id", project_id),
        ("workflow_id", workflow_id),
        ("reason", reason),
    ):
        if value:
            clauses.append(f"{column} = %s")
            params.append(value)  # type: ignore[arg-type]
    if status != "all":
        clauses.append("status = %s")
        params.append(status or "open")
    for bound, operator in zip(window, (">=", "<"), strict=True):
        if bound is not None:
            clauses.append(f"create_time {operator} %s")
            params.append(bound)  # type: ignore[arg-type]
    if before is not None:
        clauses.append("(create_time, id) < (%s::timestamptz, %s::uuid)")
        params.extend(before)
    cur = await conn.execute(
        f"SELECT * FROM orchestrator.dead_letters WHERE {' AND '.join(clauses)}"
        " ORDER BY create_time DESC, id DESC LIMIT %s",
        (*params, limit),
    )
    return [DeadLetterRow(**r) for r in await cur.fetchall()]
