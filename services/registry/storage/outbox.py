"""The registry's transactional outbox.

A state record is inserted in the same transaction as the change it
describes, so the bus sees every committed change and nothing that rolled
back. ``OutboxRelay`` drains it in order.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from libs.bus.base import Headers


@dataclass(frozen=True)
class OutboxRecord:
    id: int
    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers


async def enqueue(
    conn: AsyncConnection[Any], topic: str, key: bytes | None, value: bytes | None, headers: Headers
) -> None:
    await conn.execute(
        "INSERT INTO registry.outbox (topic, key, value, headers) VALUES (%s, %s, %s, %s)",
        (topic, key, value, Jsonb([[k, v.decode("latin-1")] for k, v in headers])),
    )


class OutboxStore:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    @asynccontextmanager
    async def claim(
        self, limit: int
    ) -> AsyncIterator[tuple[list[OutboxRecord], AsyncConnection[Any]]]:
        """Lock the oldest unsent records; they are deleted if the block succeeds.

        SKIP LOCKED lets several registry replicas relay without sending a
        record twice at the same time; a crash before commit leaves the rows
        to be sent again (at-least-once, consumers dedupe by revision).
        """
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT * FROM registry.outbox ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED",
                (limit,),
            )
            records = [_record(r) for r in await cur.fetchall()]  # type: ignore[arg-type]
            yield records, conn
            if records:
                await conn.execute(
                    "DELETE FROM registry.outbox WHERE id = ANY(%s)", ([r.id for r in records],)
                )


def _record(row: dict[str, Any]) -> OutboxRecord:
    headers = row["headers"] if isinstance(row["headers"], list) else json.loads(row["headers"])
    return OutboxRecord(
        id=row["id"],
        topic=row["topic"],
        key=bytes(row["key"]) if row["key"] is not None else None,
        value=bytes(row["value"]) if row["value"] is not None else None,
        headers=tuple((k, v.encode("latin-1")) for k, v in headers),
    )
