"""A transactional outbox per service schema, and the relay that drains it.

A record is inserted in the same transaction as the change it describes, so
the bus sees every committed change and nothing that rolled back. The relay
publishes in id order; SKIP LOCKED lets several replicas relay without
sending a record twice at the same time, and a crash between publish and
commit only repeats a record (consumers are idempotent).

Each service's schema has a table created by its own migration:

    CREATE TABLE outbox (id bigserial PRIMARY KEY, topic text NOT NULL,
        key bytea, value bytea, headers jsonb NOT NULL DEFAULT '[]',
        create_time timestamptz NOT NULL DEFAULT now());
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from libs.bus import Bus
from libs.bus.base import Headers, inject_trace_context

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutboxRecord:
    id: int
    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers


async def enqueue(
    conn: AsyncConnection[Any],
    schema: str,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    headers: Headers = (),
) -> None:
    """Add a record in the caller's transaction; the current trace context rides along."""
    carried = inject_trace_context(headers)
    await conn.execute(
        sql.SQL(
            "INSERT INTO {}.outbox (topic, key, value, headers) VALUES (%s, %s, %s, %s)"
        ).format(sql.Identifier(schema)),
        (topic, key, value, Jsonb([[k, v.decode("latin-1")] for k, v in carried])),
    )


class OutboxRelay:
    """Moves committed outbox records to the bus.

    Woken right after a commit (``notify``) and otherwise polls, so records
    left behind by a crash are still sent.
    """

    def __init__(
        self, pool: AsyncConnectionPool, schema: str, bus: Bus, poll_interval_s: float = 0.5
    ) -> None:
        self._pool = pool
        self._schema = schema
        self._bus = bus
        self._poll = poll_interval_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def notify(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"{self._schema}-outbox-relay")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def drain(self) -> int:
        """Send everything pending now; returns how many records were sent."""
        sent = 0
        while batch := await self._send_batch(limit=100):
            sent += batch
        return sent

    async def _send_batch(self, limit: int) -> int:
        table = sql.Identifier(self._schema, "outbox")
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                sql.SQL("SELECT * FROM {} ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED").format(
                    table
                ),
                (limit,),
            )
            records = [_record(r) for r in await cur.fetchall()]  # type: ignore[arg-type]
            for record in records:
                await self._bus.publish(
                    record.topic, record.value, key=record.key, headers=record.headers
                )
            if records:
                await conn.execute(
                    sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(table),
                    ([r.id for r in records],),
                )
        return len(records)

    async def _run(self) -> None:
        while True:
            try:
                await self.drain()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s outbox relay failed; retrying", self._schema)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._poll)
            self._wake.clear()


def _record(row: dict[str, Any]) -> OutboxRecord:
    return OutboxRecord(
        id=row["id"],
        topic=row["topic"],
        key=bytes(row["key"]) if row["key"] is not None else None,
        value=bytes(row["value"]) if row["value"] is not None else None,
        headers=tuple((k, v.encode("latin-1")) for k, v in row["headers"]),
    )
