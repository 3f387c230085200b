"""Temporal's side of the benchmark, run with the peer venv's python.

``worker``: a Temporal worker (SDK defaults: sandboxed workflows, 100 concurrent activities)
whose workflow ``OrderScoring`` runs ``steps`` activities one after another; each activity
scores the order and upserts its row in PostgreSQL. ``drive``: starts one workflow per
order (workflow id = order id) and reads each run's close time from the server's visibility
store. Arguments: the mode and a JSON config (see bench/peers/temporal.py).
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    import job
    import offer

TASK_QUEUE = "orders"


@activity.defn
async def score_and_upsert(order: dict[str, Any]) -> int:
    pool = _pool()
    async with pool.connection() as conn:
        await conn.execute(job.UPSERT, job.upsert_args(order))
    return int(job.score(order)[0])


@workflow.defn
class OrderScoring:
    @workflow.run
    async def run(self, order: dict[str, Any], steps: int) -> int:
        score = 0
        for _ in range(steps):
            score = await workflow.execute_activity(
                score_and_upsert, order, start_to_close_timeout=timedelta(seconds=30)
            )
        return score


_POOL: Any = None


def _pool() -> Any:
    assert _POOL is not None
    return _POOL


async def worker(config: dict[str, Any]) -> None:
    global _POOL
    from psycopg_pool import AsyncConnectionPool

    _POOL = AsyncConnectionPool(config["database_url"], min_size=2, max_size=10, open=False)
    await _POOL.open()
    client = await Client.connect(config["address"])
    async with Worker(
        client, task_queue=TASK_QUEUE, workflows=[OrderScoring], activities=[score_and_upsert]
    ):
        print(offer.READY, flush=True)
        await asyncio.Event().wait()


class Temporal(offer.System):
    def __init__(self, client: Client, rows: offer.Rows) -> None:
        self.client = client
        self.rows = rows

    async def submit(self, steps: int, key: str) -> None:
        await self.client.start_workflow(
            OrderScoring.run, args=[job.order(key), steps], id=key, task_queue=TASK_QUEUE
        )

    async def finished(self, steps: int, prefix: str, count: int) -> tuple[int, int]:
        # Visibility queries scan SQLite and stall the server's writes: ask the rows first.
        upserted = await self.rows.progress(prefix, steps)
        if upserted < count:
            return upserted, 0
        base = f'WorkflowId STARTS_WITH "{prefix}"'
        done = await self.client.count_workflows(f'{base} AND ExecutionStatus = "Completed"')
        bad = await self.client.count_workflows(
            f'{base} AND ExecutionStatus IN ("Failed", "Terminated", "TimedOut", "Canceled")'
        )
        return done.count, bad.count

    async def completions(self, steps: int, prefix: str) -> dict[str, float]:
        query = f'WorkflowId STARTS_WITH "{prefix}" AND ExecutionStatus = "Completed"'
        return {
            wf.id: wf.close_time.timestamp()
            async for wf in self.client.list_workflows(query, page_size=1000)
            if wf.close_time is not None
        }


async def drive(config: dict[str, Any]) -> None:
    client = await Client.connect(config["address"])
    rows = offer.Rows(config["database_url"])
    await rows.create_table()
    offer.emit(await offer.drive(Temporal(client, rows), config))


if __name__ == "__main__":
    mode, raw = sys.argv[1], json.loads(sys.argv[2])
    offer.main(worker if mode == "worker" else drive, raw)
