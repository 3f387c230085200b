"""The floors beneath the job, on the same machine: what no system built on these parts can
beat, one part at a time.

- Kafka: a bare aiokafka produce→consume loop with the bus's producer settings
  (bench/e2e_bench.py ``kafka_floor``), msgs/s.
- PostgreSQL: the job's upsert (the peers' row, same columns and JSON data) in batches of
  ``BATCH`` rows, one transaction per batch, psycopg pipelining the statements, rows/s.
- WebAssembly: the reference action instantiated and called on a fresh store per run with
  raw wasmtime-py C calls and the job's envelope (executor_bench's floor runner), runs/s in
  one process.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import psycopg

from bench import e2e_bench, executor_bench
from bench.peers.apps import job
from tests.harness.actions import order_risk_scorer

BATCH = 500


def postgres_upsert(database_url: str, rows: int = 50_000) -> float:
    """rows/s of batched upserts of the job's row into a fresh table."""
    orders = [job.upsert_args(job.order(f"floor-{n:06d}")) for n in range(rows)]
    with psycopg.connect(database_url, autocommit=False) as conn:
        conn.execute(job.CREATE_TABLE)
        conn.execute(f"TRUNCATE {job.TABLE}")
        conn.commit()
        started = time.perf_counter()
        with conn.cursor() as cur:
            for start in range(0, rows, BATCH):
                cur.executemany(job.UPSERT, orders[start : start + BATCH])
                conn.commit()
        return rows / (time.perf_counter() - started)


def wasm_envelope() -> bytes:
    """What the executor hands the action for one benchmark order (no secrets)."""
    return json.dumps(
        {
            "payload": job.order("o-floor"),
            "secrets": {},
            "permissions": [],
            "action": e2e_bench.ACTION,
        }
    ).encode()


def wasm_instantiate_call(runs: int = 20_000) -> float:
    """runs/s of instantiate + call of the reference action, raw wasmtime-py, one process."""
    from wasmtime import Module

    from services.executor.sandbox.engine import EpochTicker, new_engine

    engine = new_engine()
    with EpochTicker(engine, 0.1):
        module = Module(engine, order_risk_scorer())
        once = executor_bench._floor_runner(engine, module, wasm_envelope())
        output = json.loads(once())
        if output["projection"]["data"]["score"] != 0:
            raise RuntimeError(f"the action scored the benchmark order {output}")
        for _ in range(min(1000, runs)):
            once()
        started = time.perf_counter()
        for _ in range(runs):
            once()
        return runs / (time.perf_counter() - started)


async def kafka(bootstrap: str, messages: int = 20_000) -> float:
    size = len(e2e_bench.envelope("orders.created", job.order("o-000000"))[1])
    return await e2e_bench.kafka_floor(bootstrap, f"floor{uuid.uuid4().hex[:8]}", messages, size)


def as_json(kafka_msgs: float, postgres_rows: float, wasm_runs: float) -> dict[str, Any]:
    return {
        "kafka_msgs_per_s": kafka_msgs,
        "postgres_upsert_rows_per_s": postgres_rows,
        "wasm_runs_per_s": wasm_runs,
    }
