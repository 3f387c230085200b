"""The executor benchmark still runs end to end (tiny counts: a smoke test, not a measurement)."""

from __future__ import annotations

import pytest

from bench.executor_bench import run_bench


def test_bench_runs_and_reports_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    figures = run_bench(runs=200, throughput_runs=1000, trials=1)
    for name in (
        "run_p50_us",
        "run_p99_us",
        "floor_p50_us",
        "floor_p99_us",
        "runs_per_s_1_process",
        "runs_per_s_2_processes",
        "pool_runs_per_s_1_worker",
        "pool_runs_per_s_2_workers",
        "fuel_stop_ms",
    ):
        assert figures[name] > 0, name
    assert figures["run_p50_us"] <= figures["run_p99_us"]
    assert "per-run cost / floor" in capsys.readouterr().out
