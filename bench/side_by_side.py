"""One system through the benchmark's plan, the same way for eventflow and every peer.

For each shape (steps per run): a warm-up, the fixed-rate phase, then saturation
(bench/peers/apps/offer.py). A shape that ends with runs still in flight (a phase cut off
by its time limit) leaves a backlog, so the system is started afresh (new database, new
server state) before the next shape. Peak
memory is sampled over the whole time, of the system's own processes and of them together
with what they depend on (PostgreSQL; for eventflow also Kafka).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg

from bench.memory import PeakMemory
from bench.peers.apps.offer import Plan
from bench.peers.peer import PeerFailed


class Instance(Protocol):
    """A system started afresh."""

    async def start(self) -> None: ...

    def pids(self) -> list[int]: ...

    def dependency_pids(self) -> list[int]: ...

    async def drive(
        self, steps: int, phases: list[dict[str, Any]], warmup: int
    ) -> dict[str, Any]: ...

    async def stop(self) -> None: ...


@dataclass
class Measured:
    """One system's result: figures by shape and phase, peak memory, versions; or why not."""

    figures: dict[str, Any] = field(default_factory=dict)
    memory_mb: dict[str, float] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    starts: int = 0
    failed: str = ""

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "versions": self.versions,
            "memory_mb": self.memory_mb,
            "starts": self.starts,
            **self.figures,
        }
        if self.failed:
            out["failed"] = self.failed
        return out


async def measure(
    versions: Callable[[], dict[str, str]],
    fresh: Callable[[int], Instance],
    plan: Plan,
) -> Measured:
    """Every shape and phase of ``plan`` on instances made by ``fresh(n)``."""
    result = Measured()
    current: list[Instance] = []
    memory = PeakMemory(
        {
            "server": lambda: [p for i in current for p in i.pids()],
            "with_dependencies": lambda: [
                p for i in current for p in (*i.pids(), *i.dependency_pids())
            ],
        }
    )
    try:
        result.versions = versions()
        with memory:
            await _shapes(fresh, plan, current, result)
    except (PeerFailed, OSError, psycopg.Error) as error:
        result.failed = str(error) if isinstance(error, PeerFailed) else repr(error)
    finally:
        for instance in current:
            await instance.stop()
        result.memory_mb = memory.peaks_mb()
    return result


async def _shapes(
    fresh: Callable[[int], Instance], plan: Plan, current: list[Instance], result: Measured
) -> None:
    needs_start = True
    for steps in plan.shapes:
        pending = plan.phases()
        shape: dict[str, Any] = {}
        result.figures[f"{steps}step"] = shape
        while pending:
            if needs_start:
                await _restart(fresh, current, result)
                needs_start = False
            got = await current[0].drive(steps, pending, plan.warmup)
            if not got:
                raise PeerFailed(f"the driver returned no figures for {pending[0]['phase']}")
            shape.update(got)
            pending = pending[len(got) :]
            # A backlog left behind would slow the next shape: start that one afresh.
            needs_start = not all(phase["complete"] for phase in got.values())


async def _restart(
    fresh: Callable[[int], Instance], current: list[Instance], result: Measured
) -> None:
    for instance in current:
        await instance.stop()
    current.clear()
    result.starts += 1
    instance = fresh(result.starts)
    current.append(instance)
    await instance.start()
