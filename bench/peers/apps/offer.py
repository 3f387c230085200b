"""How every driver offers runs: as fast as the system takes them, or at a fixed rate.

Standard library only (the peers' drivers import it from the peer venv, by file).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

try:
    from bench.peers.apps import job
except ImportError:  # a peer's driver, run from the peer venv beside job.py
    import job  # type: ignore[no-redef]

Submit = Callable[[str], Coroutine[Any, Any, None]]
IN_FLIGHT = 64  # concurrent submissions at saturation: enough to keep any system busy
READY = "bench worker ready"  # what a worker prints once it takes work


@dataclass
class Plan:
    """The whole benchmark, per system: for each shape (steps per run), a warm-up, the fixed
    rate phase, then saturation. A phase that has not finished within its time is cut off:
    its figures count the runs completed by then, and the system is started afresh before
    the next phase (its backlog would otherwise slow whatever comes next)."""

    shapes: list[int] = field(default_factory=lambda: [1, 3])
    warmup: int = 20
    rate: float = 200.0
    rate_seconds: float = 30.0
    rate_drain_s: float = 15.0
    saturation: int = 10_000
    saturation_timeout_s: float = 45.0

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Plan:
        return cls(**raw)

    def phases(self) -> list[dict[str, Any]]:
        """The phases of one shape, as ``run_phases`` takes them."""
        out = []
        if self.rate_seconds > 0:
            out.append(
                {
                    "phase": "rate",
                    "count": int(self.rate * self.rate_seconds),
                    "rate": self.rate,
                    "timeout_s": self.rate_drain_s,
                }
            )
        out.append(
            {
                "phase": "saturation",
                "count": self.saturation,
                "rate": None,
                "timeout_s": self.saturation_timeout_s,
            }
        )
        return out


def run_keys(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{n:06d}" for n in range(count)]


async def saturate(submit: Submit, keys: list[str]) -> dict[str, float]:
    """Every key submitted as fast as the system accepts: key -> wall clock at the offer."""
    sent: dict[str, float] = {}
    queue = iter(keys)

    async def lane() -> None:
        for key in queue:
            sent[key] = time.time()
            await submit(key)

    await asyncio.gather(*(lane() for _ in range(IN_FLIGHT)))
    return sent


async def paced(submit: Submit, keys: list[str], rate: float) -> dict[str, float]:
    """Key i offered at start + i/rate, whether or not earlier offers were accepted yet."""
    sent: dict[str, float] = {}
    tasks: list[asyncio.Task[None]] = []
    start = time.monotonic()
    for i, key in enumerate(keys):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        sent[key] = time.time()
        tasks.append(asyncio.create_task(submit(key)))
    await asyncio.gather(*tasks)
    return sent


async def until(
    check: Callable[[], Awaitable[bool]], timeout_s: float, interval_s: float = 0.25
) -> bool:
    """Poll ``check`` until it holds or the time is up (the poll never shows in figures)."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(interval_s)
    return True


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def emit(figures: dict[str, Any]) -> None:
    """The driver's result: one JSON line on stdout, read by bench/peers/peer.py."""
    print(json.dumps(figures), flush=True)


class System:
    """What a driver needs from one system; run keys double as order ids."""

    async def submit(self, steps: int, key: str) -> None:
        raise NotImplementedError

    async def finished(self, steps: int, prefix: str, count: int) -> tuple[int, int]:
        """(runs completed, runs failed) among the ``count`` keys that start with ``prefix``."""
        raise NotImplementedError

    async def completions(self, steps: int, prefix: str) -> dict[str, float]:
        """key -> wall clock at which the engine recorded the run complete."""
        raise NotImplementedError


async def run_phase(
    system: System, steps: int, prefix: str, count: int, rate: float | None, timeout_s: float
) -> dict[str, Any]:
    """Offer ``count`` runs, wait up to ``timeout_s`` after the last offer, and measure."""
    keys = run_keys(prefix, count)

    async def submit(key: str) -> None:
        await system.submit(steps, key)

    started = time.monotonic()
    sent = await (paced(submit, keys, rate) if rate else saturate(submit, keys))
    counts = [0, 0]

    async def settled() -> bool:
        counts[:] = await system.finished(steps, prefix, count)
        return counts[0] + counts[1] >= count

    complete = await until(settled, timeout_s)
    if not complete:
        log(f"{prefix}: {counts[0]}/{count} completed {timeout_s:g} s after the last offer")
    figures: dict[str, Any] = job.phase_figures(sent, await system.completions(steps, prefix))
    figures.update(
        failed=counts[1],
        prefix=prefix,
        complete=complete and counts[1] == 0,
        seconds=time.monotonic() - started,
    )
    if rate:
        figures["offered_per_s"] = rate
    return figures


async def run_phases(
    system: System, name: str, steps: int, phases: list[dict[str, Any]], warmup: int
) -> dict[str, Any]:
    """A warm-up, then ``phases`` in order, stopping after one that was cut off."""
    shape = f"{steps}step"
    if warmup:
        await run_phase(system, steps, f"{name}-{shape}-warmup", warmup, None, 60)
    figures: dict[str, Any] = {}
    for spec in phases:
        prefix = f"{name}-{shape}-{spec['phase']}"
        result = await run_phase(
            system, steps, prefix, spec["count"], spec["rate"], spec["timeout_s"]
        )
        log(f"{prefix}: {result}")
        figures[spec["phase"]] = result
        if not result["complete"]:
            break
    return figures


async def drive(system: System, config: dict[str, Any]) -> dict[str, Any]:
    """A driver's work, as bench/peers/peer.py asks for it."""
    return await run_phases(
        system, config["name"], config["steps"], config["phases"], config["warmup"]
    )


class Rows:
    """The peers' rows in PostgreSQL: how far a phase got, without asking the engine."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self._conn: Any = None

    async def _connection(self) -> Any:
        import psycopg

        if self._conn is None:
            self._conn = await psycopg.AsyncConnection.connect(self.database_url, autocommit=True)
        return self._conn

    async def create_table(self) -> None:
        await (await self._connection()).execute(job.CREATE_TABLE)

    async def progress(self, prefix: str, steps: int) -> int:
        """Runs under ``prefix`` whose row has seen all ``steps`` upserts."""
        conn = await self._connection()
        row = await (await conn.execute(job.PROGRESS, (f"{prefix}-%", steps))).fetchone()
        return int(row[0])


def main(entry: Callable[[dict[str, Any]], Any], config: dict[str, Any]) -> None:
    """Run a worker or driver (a coroutine function, or a plain one that blocks); exit at
    once afterwards, without waiting for SDK threads (Temporal's core runtime, for one,
    does not always finalize cleanly at exit)."""
    import inspect
    import os
    import traceback

    code = 0
    try:
        if inspect.iscoroutinefunction(entry):
            asyncio.run(entry(config))
        else:
            entry(config)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
