"""Events and the quarantine, in PostgreSQL."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from libs.db import jsonb

Conn = AsyncConnection[Any]


@dataclass(frozen=True)
class EventRow:
    id: uuid.UUID
    organization_id: str
    project_id: str
    environment: str
    event_id: str
    type: str
    source: str
    subject: str | None
    data: dict[str, Any]
    time: datetime | None
    replay_skip_side_effects: bool
    causation_id: str | None
    correlation_id: str | None
    depth: int
    receive_time: datetime | None = None
    # The ingest span, as W3C headers: the parent of this event's step spans.
    traceparent: str | None = None
    tracestate: str | None = None
    is_test: bool = False


@dataclass(frozen=True)
class QuarantinedRecord:
    reason: str
    detail: str
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[list[str]]


_COLUMNS = (
    "id, organization_id, project_id, environment, event_id, type, source, subject, data,"
    " time, replay_skip_side_effects, causation_id, correlation_id, depth, receive_time,"
    " traceparent, tracestate, is_test"
)


async def insert_new(conn: Conn, events: list[EventRow]) -> list[EventRow]:
    """Insert events; return only those not seen before (redeliveries are skipped), in
    the order given. One statement however many there are."""
    if not events:
        return []
    cur = await conn.execute(
        f"INSERT INTO orchestrator.events ({_NEW_COLUMNS}) SELECT {_NEW_COLUMNS}"
        " FROM jsonb_to_recordset(%s) AS e(id uuid, organization_id text, project_id text,"
        " environment text, event_id text, type text, source text, subject text, data jsonb,"
        " time timestamptz, replay_skip_side_effects bool, causation_id text,"
        " correlation_id text, depth int, traceparent text, tracestate text, is_test bool)"
        " ON CONFLICT (organization_id, project_id, environment, event_id) DO NOTHING"
        f" RETURNING {_COLUMNS}",
        (jsonb.rows([_new(event) for event in events]),),
    )
    stored = {row["id"]: row for row in await cur.fetchall()}
    return [EventRow(**stored[e.id]) for e in events if e.id in stored]


_NEW_COLUMNS = (
    "id, organization_id, project_id, environment, event_id, type, source, subject, data,"
    " time, replay_skip_side_effects, causation_id, correlation_id, depth, traceparent,"
    " tracestate, is_test"
)


def _new(event: EventRow) -> dict[str, Any]:
    return {
        "id": event.id,
        "organization_id": event.organization_id,
        "project_id": event.project_id,
        "environment": event.environment,
        "event_id": event.event_id,
        "type": event.type,
        "source": event.source,
        "subject": event.subject,
        "data": event.data,
        "time": event.time,
        "replay_skip_side_effects": event.replay_skip_side_effects,
        "causation_id": event.causation_id,
        "correlation_id": event.correlation_id,
        "depth": event.depth,
        "traceparent": event.traceparent,
        "tracestate": event.tracestate,
        "is_test": event.is_test,
    }


async def quarantine(conn: Conn, records: list[QuarantinedRecord]) -> None:
    for r in records:
        digest = hashlib.sha256(r.value or b"").hexdigest()
        await conn.execute(
            "INSERT INTO orchestrator.quarantine (reason, detail, topic, partition, record_offset,"
            " key, value, headers, value_digest) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (topic, partition, record_offset, value_digest) DO NOTHING",
            (
                r.reason,
                r.detail,
                r.topic,
                r.partition,
                r.offset,
                r.key,
                r.value,
                Jsonb(r.headers),
                digest,
            ),
        )


async def find(
    conn: Conn, organization_id: str, project_id: str, environment: str, event_id: str
) -> EventRow | None:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM orchestrator.events WHERE organization_id = %s"
        " AND project_id = %s AND environment = %s AND event_id = %s",
        (organization_id, project_id, environment, event_id),
    )
    row = await cur.fetchone()
    return EventRow(**row) if row else None


async def by_ids(conn: Conn, ids: list[uuid.UUID]) -> list[EventRow]:
    cur = await conn.execute(
        f"SELECT {_COLUMNS} FROM orchestrator.events WHERE id = ANY(%s)", (ids,)
    )
    return [EventRow(**r) for r in await cur.fetchall()]


async def by_id(conn: Conn, event: uuid.UUID) -> EventRow:
    cur = await conn.execute(f"SELECT {_COLUMNS} FROM orchestrator.events WHERE id = %s", (event,))
    return EventRow(**await cur.fetchone())  # type: ignore[arg-type]


async def quarantine_count(conn: Conn) -> int:
    cur = await conn.execute("SELECT count(*) AS n FROM orchestrator.quarantine")
    row = await cur.fetchone()
    return int(row["n"]) if row else 0


@dataclass(frozen=True)
class ReplaySelection:
    """Stored events of one project and environment, by type and/or receive time."""

    organization_id: str
    project_id: str
    environment: str
    type: str | None
    since: datetime | None
    until: datetime

    def where(self, alias: str) -> tuple[str, list[Any]]:
        clauses = [
            f"{alias}.organization_id = %s",
            f"{alias}.project_id = %s",
            f"{alias}.environment = %s",
            f"{alias}.receive_time < %s",
        ]
        params: list[Any] = [self.organization_id, self.project_id, self.environment, self.until]
        if self.type:
            clauses.append(f"{alias}.type = %s")
            params.append(self.type)
        if self.since:
            clauses.append(f"{alias}.receive_time >= %s")
            params.append(self.since)
        return " AND ".join(clauses), params

    def sql(self) -> tuple[str, list[Any]]:
        """Selected events, less derived ones whose cause is selected too: replaying
        the cause derives them again, so replaying both would run them twice."""
        mine, params = self.where("e")
        cause, cause_params = self.where("c")
        return (
            f"{mine} AND NOT (e.depth > 0 AND EXISTS (SELECT 1 FROM orchestrator.events c"
            f" WHERE c.event_id = e.causation_id AND {cause}))",
            params + cause_params,
        )


async def count_selected(conn: Conn, selection: ReplaySelection) -> int:
    where, params = selection.sql()
    cur = await conn.execute(
        f"SELECT count(*) AS n FROM orchestrator.events e WHERE {where}", params
    )
    row = await cur.fetchone()
    return int(row["n"]) if row else 0


async def page_selected(
    conn: Conn, selection: ReplaySelection, after: tuple[datetime, uuid.UUID] | None, limit: int
) -> list[EventRow]:
    """The next page, oldest first."""
    where, params = selection.sql()
    if after is not None:
        where += " AND (e.receive_time, e.id) > (%s, %s)"
        params = [*params, *after]
    columns = ", ".join(f"e.{c.strip()}" for c in _COLUMNS.split(","))
    cur = await conn.execute(
        f"SELECT {columns} FROM orchestrator.events e WHERE {where}"
        " ORDER BY e.receive_time, e.id LIMIT %s",
        (*params, limit),
    )
    return [EventRow(**r) for r in await cur.fetchall()]
