"""The side-by-side benchmark (bench/compare.py) with 20 events per system and shape.

It measures nothing here: it checks that every system really ran the job, that is, each of
the 20 runs per shape completed in the engine's own records and left its row (eventflow:
the order_risk projection; peers: their table) with the score the action computes, and
that a peer which cannot start is reported with its reason instead of being left out.
Peers are installed into ~/.cache/eventflow/bench-peers on first use.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from bench import compare, eventflow_job, report, side_by_side
from bench.peers import peer
from bench.peers.apps.offer import Plan
from tests.conftest import own_temp_dir

SMOKE = Plan(shapes=[1, 3], warmup=0, rate_seconds=0, saturation=20, saturation_timeout_s=60)


@pytest.fixture
def bench(postgres_server: str) -> Any:
    with own_temp_dir("bench-smoke") as folder:
        yield peer.Bench(folder, postgres_server, SMOKE.__dict__)


def assert_ran_every_run(name: str, figures: dict[str, Any]) -> None:
    assert "failed" not in figures, f"{name}: {figures.get('failed')}"
    for shape in ("1step", "3step"):
        phase = figures[shape]["saturation"]
        assert phase["completed"] == 20, (name, shape, phase)
        assert phase["failed"] == 0 and phase["complete"], (name, shape, phase)
        assert phase["rows"] == 20, (name, shape, phase)
        assert phase["runs_per_s"] > 0 and phase["p99_ms"] >= phase["p50_ms"] > 0
    assert figures["memory_mb"]["server"] > 0, name
    assert figures["versions"], name


@pytest.mark.timeout(600)  # a first run installs the peers (pip, npm) before measuring
async def test_every_system_completes_every_run_and_writes_its_rows(
    bench: peer.Bench, kafka_bootstrap: str
) -> None:
    systems = {"eventflow": await compare.measure_eventflow(bench, kafka_bootstrap, [], SMOKE)}
    systems.update(await compare.measure_peers(bench, SMOKE, list(compare.PEERS)))
    floors = {"kafka_msgs_per_s": 1.0, "postgres_upsert_rows_per_s": 1.0, "wasm_runs_per_s": 1.0}
    report.print_tables(report.assemble(systems, floors, SMOKE.__dict__))
    assert set(systems) == {"eventflow", "temporal", "dbos", "restate"}
    for name, figures in systems.items():
        assert_ran_every_run(name, figures)


@pytest.mark.timeout(300)
async def test_the_broker_warm_up_runs_eventflow_traffic_through_a_throwaway_stack(
    bench: peer.Bench, kafka_bootstrap: str
) -> None:
    figures = await eventflow_job.warm_broker(bench, kafka_bootstrap, [], rate=20.0, seconds=1.0)

    assert figures["offered"] == figures["completed"] == 20 and figures["complete"]
    # Stopped afterwards: nothing of it is left to compete with what is measured next.
    assert _processes_running("bench.eventflow_server") == []


def _processes_running(module: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if module.encode() in argv:
            found.append(int(entry.name))
    return found


def _exits_at_start(bench: peer.Bench, url: str, started: list[peer.Process]) -> dict[str, Any]:
    worker = peer.Process.start(
        "broken-worker",
        [sys.executable, "-c", "import sys; print('no such engine'); sys.exit(3)"],
        bench.folder,
    )
    started.append(worker)
    worker.wait_for_line("bench worker ready")
    return {}


async def test_a_peer_that_cannot_start_is_reported_with_its_reason(bench: peer.Bench) -> None:
    broken = peer.Peer("broken", "none_app.py", lambda: {"broken": "0"}, _exits_at_start)

    def fresh(index: int) -> side_by_side.Instance:
        return peer.PeerInstance(broken, bench, index)

    measured = await side_by_side.measure(broken.versions, fresh, SMOKE)
    assert "broken-worker exited with 3 while starting" in measured.failed
    assert "no such engine" in measured.failed
    assert measured.as_json()["failed"] == measured.failed and not measured.figures["1step"]


def test_bench_peers_selects_peers_and_refuses_unknown_names() -> None:
    assert compare.selected_peers({}) == ["temporal", "dbos", "restate"]
    assert compare.selected_peers({"BENCH_PEERS": ""}) == []
    assert compare.selected_peers({"BENCH_PEERS": " restate,dbos "}) == ["restate", "dbos"]
    with pytest.raises(SystemExit, match="unknown peer"):
        compare.selected_peers({"BENCH_PEERS": "temporal,kafka-streams"})


async def test_peers_left_out_by_bench_peers_are_reported_as_skipped(
    bench: peer.Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    systems = await compare.measure_peers(bench, SMOKE, [])
    assert systems == {name: {"skipped": "not in BENCH_PEERS"} for name in compare.PEERS}
    floors = {"kafka_msgs_per_s": 1.0, "postgres_upsert_rows_per_s": 1.0, "wasm_runs_per_s": 1.0}
    report.print_tables(report.assemble({"eventflow": {}, **systems}, floors, SMOKE.__dict__))
    printed = capsys.readouterr().out
    for name in compare.PEERS:
        assert f"{name:<10}  skipped: not in BENCH_PEERS" in printed
