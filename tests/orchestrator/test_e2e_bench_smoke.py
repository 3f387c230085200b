"""The end-to-end bench (bench/e2e_bench.py) with tiny numbers, so it keeps running.

It measures nothing here: it runs every phase but the fixed-load one on the session's
broker and PostgreSQL (its own database, its own topic namespace) and checks that each
figure came out.
"""

from __future__ import annotations

from bench import e2e_bench
from tests.conftest import create_database, own_temp_dir


async def test_the_e2e_bench_runs_end_to_end(postgres_server: str, kafka_bootstrap: str) -> None:
    with own_temp_dir("e2e-bench") as folder:
        figures = await e2e_bench.measure(
            database_url=create_database(postgres_server),
            kafka_bootstrap=kafka_bootstrap,
            folder=folder,
            rate_seconds=0,
            saturation_events=20,
            floor_messages=200,
        )
    e2e_bench.print_table(figures)
    assert not any(key.endswith("_rate_eps") for key in figures)
    for shape in ("one_step", "three_step"):
        assert figures[f"{shape}_saturation_events"] == 20
    assert figures and all(value > 0 for value in figures.values()), figures
