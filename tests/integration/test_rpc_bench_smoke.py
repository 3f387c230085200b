"""`make bench`'s round-trip table still runs (a few calls, no timing asserted)."""

from __future__ import annotations

import asyncio

from bench import rpc_bench


async def test_the_round_trip_bench_measures_every_row() -> None:
    figures = await asyncio.to_thread(rpc_bench.run_bench, 5)
    for name in ("execute", "resolve", "resolve10", "aesgcm_decrypt"):
        assert figures[f"{name}_p50_us"] > 0
        assert figures[f"{name}_p99_us"] >= figures[f"{name}_p50_us"]
