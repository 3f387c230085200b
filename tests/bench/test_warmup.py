"""The warm-up every system gets before its measured phases (bench/peers/apps/offer.py)."""

from __future__ import annotations

import time

from bench import kafka_warmup
from bench.peers.apps import offer


class InstantSystem(offer.System):
    """Completes every run the moment it is submitted, and keeps the submit clock."""

    def __init__(self) -> None:
        self.submitted: dict[str, float] = {}

    async def submit(self, steps: int, key: str) -> None:
        self.submitted[key] = time.monotonic()

    async def finished(self, steps: int, prefix: str, count: int) -> tuple[int, int]:
        return sum(1 for key in self.submitted if key.startswith(prefix)), 0

    async def completions(self, steps: int, prefix: str) -> dict[str, float]:
        now = time.time()
        return {key: now for key in self.submitted if key.startswith(prefix)}


async def test_the_warm_up_is_offered_at_the_fixed_rate_before_the_measured_phase() -> None:
    system = InstantSystem()
    phases = offer.Plan(warmup=40, rate=100.0, rate_seconds=0.2, saturation=5).phases()

    figures = await offer.run_phases(system, "fake", 1, phases, warmup=40)

    warm = sorted(at for key, at in system.submitted.items() if "-warmup-" in key)
    rate = [at for key, at in system.submitted.items() if "-rate-" in key]
    assert len(warm) == 40 and max(warm) < min(rate)
    # Paced at 100/s: 40 offers span about 0.4 s, not one burst.
    assert warm[-1] - warm[0] >= 0.3
    assert figures["rate"]["completed"] == 20 and figures["saturation"]["completed"] == 5


async def test_without_a_fixed_rate_phase_the_warm_up_is_one_burst() -> None:
    system = InstantSystem()
    phases = offer.Plan(warmup=40, rate_seconds=0, saturation=5).phases()

    await offer.run_phases(system, "fake", 1, phases, warmup=40)

    warm = sorted(at for key, at in system.submitted.items() if "-warmup-" in key)
    assert len(warm) == 40 and warm[-1] - warm[0] < 0.3


async def test_the_broker_warm_up_sends_single_records_and_reads_them_back(
    kafka_bootstrap: str,
) -> None:
    sent, received = await kafka_warmup.warm(kafka_bootstrap, seconds=2.0)

    # One record per produce request from each sender: hundreds in a second, not one batch.
    assert sent > 100
    assert received == sent
