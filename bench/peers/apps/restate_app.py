"""Restate's side of the benchmark, run with the peer venv's python.

``worker``: a Restate service ``OrderScoring`` served by hypercorn (HTTP/2, the settings of
the SDK's project template) whose handler ``score`` runs ``steps`` ``ctx.run`` blocks one
after another; each scores the order and upserts its row. ``drive``: sends one invocation
per order through the ingress (``/send``, idempotency key = order id, so the server keeps
the completed invocation) and reads completion times from the server's ``sys_invocation``
table. Arguments: the mode and a JSON config (see bench/peers/restate.py).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Any

import aiohttp
import job
import offer
import restate
from psycopg_pool import AsyncConnectionPool

service = restate.Service("OrderScoring")
_POOL: AsyncConnectionPool | None = None


async def score_and_upsert(order: dict[str, Any]) -> int:
    assert _POOL is not None
    async with _POOL.connection() as conn:
        await conn.execute(job.UPSERT, job.upsert_args(order))
    return int(job.score(order)[0])


@service.handler()
async def score(ctx: restate.Context, request: dict[str, Any]) -> int:
    points = 0
    for _ in range(request["steps"]):
        points = await ctx.run_typed("score_and_upsert", score_and_upsert, order=request["order"])
    return points


async def worker(config: dict[str, Any]) -> None:
    global _POOL
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    _POOL = AsyncConnectionPool(config["database_url"], min_size=2, max_size=10, open=False)
    await _POOL.open()
    hyper = Config()
    hyper.bind = [config["listen"]]
    hyper.h2_max_concurrent_streams = 2147483647
    hyper.keep_alive_max_requests = 2147483647
    hyper.keep_alive_timeout = 2147483647
    print(offer.READY, flush=True)
    await serve(restate.app(services=[service]), hyper, mode="asgi")


class Restate(offer.System):
    def __init__(self, http: aiohttp.ClientSession, config: dict[str, Any], rows: offer.Rows):
        self.http = http
        self.ingress = config["ingress"]
        self.admin = config["admin"]
        self.rows = rows

    async def submit(self, steps: int, key: str) -> None:
        async with self.http.post(
            f"{self.ingress}/OrderScoring/score/send",
            json={"order": job.order(key), "steps": steps},
            headers={"idempotency-key": key},
        ) as response:
            if response.status >= 300:
                raise RuntimeError(
                    f"ingress refused {key}: {response.status} {await response.text()}"
                )

    async def _query(self, sql: str) -> list[dict[str, Any]]:
        async with self.http.post(
            f"{self.admin}/query", json={"query": sql}, headers={"accept": "application/json"}
        ) as response:
            response.raise_for_status()
            return list((await response.json())["rows"])

    def _where(self, prefix: str) -> str:
        return f"target_service_name = 'OrderScoring' AND idempotency_key LIKE '{prefix}-%'"

    async def finished(self, steps: int, prefix: str, count: int) -> tuple[int, int]:
        # The rows first: the server's SQL engine is not free while it runs.
        upserted = await self.rows.progress(prefix, steps)
        if upserted < count:
            return upserted, 0
        rows = await self._query(
            "SELECT count(*) AS n, completion_failure IS NULL AS ok FROM sys_invocation"
            f" WHERE {self._where(prefix)} AND status = 'completed' GROUP BY ok"
        )
        by = {bool(r["ok"]): int(r["n"]) for r in rows}
        return by.get(True, 0), by.get(False, 0)

    async def completions(self, steps: int, prefix: str) -> dict[str, float]:
        rows = await self._query(
            "SELECT idempotency_key, completed_at FROM sys_invocation"
            f" WHERE {self._where(prefix)} AND status = 'completed'"
            " AND completion_failure IS NULL"
        )
        return {str(r["idempotency_key"]): _epoch(r["completed_at"]) for r in rows}


def _epoch(value: Any) -> float:
    if isinstance(value, int | float):
        return float(value) / 1000
    return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


async def drive(config: dict[str, Any]) -> None:
    rows = offer.Rows(config["database_url"])
    connector = aiohttp.TCPConnector(limit=offer.IN_FLIGHT)
    async with aiohttp.ClientSession(connector=connector) as http:
        offer.emit(await offer.drive(Restate(http, config, rows), config))


if __name__ == "__main__":
    offer.main(worker if sys.argv[1] == "worker" else drive, json.loads(sys.argv[2]))
