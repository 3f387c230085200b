"""DBOS's side of the benchmark, run with the peer venv's python.

``worker``: a DBOS application (library defaults; system database on the benchmark's
PostgreSQL) whose workflow ``order_scoring`` runs ``steps`` ``@DBOS.step`` calls one after
another; each scores the order and upserts its row. Runs arrive on the queue ``orders``
(default settings), the documented way to hand work to a DBOS application from outside.
``drive``: enqueues one workflow per order with ``DBOSClient`` (workflow id = order id) and
reads completions from DBOS's own ``workflow_status`` table. Arguments: the mode and a JSON
config (see bench/peers/dbos.py).
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import job
import offer
from dbos import DBOS, DBOSClient, DBOSConfig
from psycopg_pool import ConnectionPool

QUEUE = "orders"
_POOL: ConnectionPool | None = None


@DBOS.step()
def score_and_upsert(order: dict[str, Any]) -> int:
    assert _POOL is not None
    with _POOL.connection() as conn:
        conn.execute(job.UPSERT, job.upsert_args(order))
    return int(job.score(order)[0])


@DBOS.workflow()
def order_scoring(order: dict[str, Any], steps: int) -> int:
    score = 0
    for _ in range(steps):
        score = score_and_upsert(order)
    return score


def worker(config: dict[str, Any]) -> None:
    global _POOL
    _POOL = ConnectionPool(config["database_url"], min_size=2, max_size=10)
    dbos_config: DBOSConfig = {"name": "bench", "system_database_url": config["database_url"]}
    DBOS(config=dbos_config)
    DBOS.launch()
    DBOS.register_queue(QUEUE)
    print(offer.READY, flush=True)
    threading.Event().wait()


class Dbos(offer.System):
    def __init__(self, client: DBOSClient, rows: offer.Rows) -> None:
        self.client = client
        self.rows = rows

    async def submit(self, steps: int, key: str) -> None:
        options = {"queue_name": QUEUE, "workflow_name": "order_scoring", "workflow_id": key}
        await self.client.enqueue_async(options, job.order(key), steps)

    async def finished(self, steps: int, prefix: str, count: int) -> tuple[int, int]:
        # The rows first, as for every peer; DBOS's own table once they are all there.
        upserted = await self.rows.progress(prefix, steps)
        if upserted < count:
            return upserted, 0
        conn = await self.rows._connection()
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'SUCCESS'),"
            " count(*) FILTER (WHERE status NOT IN ('SUCCESS', 'PENDING', 'ENQUEUED'))"
            " FROM dbos.workflow_status WHERE workflow_uuid LIKE %s",
            (f"{prefix}-%",),
        )
        done, bad = await cur.fetchone()
        return int(done), int(bad)

    async def completions(self, steps: int, prefix: str) -> dict[str, float]:
        conn = await self.rows._connection()
        cur = await conn.execute(
            "SELECT workflow_uuid, updated_at FROM dbos.workflow_status"
            " WHERE workflow_uuid LIKE %s AND status = 'SUCCESS'",
            (f"{prefix}-%",),
        )
        return {str(key): int(ms) / 1000 for key, ms in await cur.fetchall()}


async def drive(config: dict[str, Any]) -> None:
    client = DBOSClient(system_database_url=config["database_url"])
    rows = offer.Rows(config["database_url"])
    offer.emit(await offer.drive(Dbos(client, rows), config))


if __name__ == "__main__":
    offer.main(worker if sys.argv[1] == "worker" else drive, json.loads(sys.argv[2]))
