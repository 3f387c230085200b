"""How every driver offers runs: as fast as the system takes them, or at a fixed rate.

Standard library only (the peers' drivers import it from the peer venv, by file).
"""

from __future__ import annotations

import abc
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
    rate phase, then saturation.

    Each phase is bounded in time, so that four systems fit in `make bench`'s budget: the
    fixed rate offers for ``rate_seconds`` and waits ``rate_drain_s`` more for the last runs;
    saturation offers until ``saturation`` runs are accepted or ``saturation_offer_s`` have
    passed, and waits ``saturation_timeout_s`` more. A cut-off phase says so (``complete``
    false) and counts what completed. Saturation's runs/s counts every run of the shape the
    system completed in its window, including a backlog the fixed rate left (the system is
    saturated either way); a backlog at the end of a shape makes the next shape start on a
    fresh system.
    """

    shapes: list[int] = field(default_factory=lambda: [1, 3])
    # One second's worth at the fixed rate.
    warmup: int = 200
    rate: float = 200.0
    rate_seconds: float = 30.0
    rate_drain_s: float = 5.0
    saturation: int = 10_000
    saturation_offer_s: float = 25.0
    saturation_timeout_s: float = 25.0

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Plan:
        return cls(**raw)

    def phases(self) -> list[dict[str, Any]]:
        """The phases of one shape, as ``run_phases`` takes them."""
        out = []
        if self.rate_seconds > 0:
            count = int(self.rate * self.rate_seconds)
            out.append(
                {
                    "phase": "rate",
                    "count": count,
                    "rate": self.rate,
                    "offer_s": None,
                    "timeout_s": self.rate_drain_s,
                }
            )
        out.append(
            {
                "phase": "saturation",
                "count": self.saturation,
                "rate": None,
                "offer_s": self.saturation_offer_s,
                "timeout_s": self.saturation_timeout_s,
            }
        )
        return out


def run_keys(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{n:06d}" for n in range(count)]


class Offers:
    """Keys offered (wall clock at the offer and when the system accepted them) and keys
    the system refused or dropped."""

    def __init__(self, submit: Submit) -> None:
        self._submit = submit
        self.sent: dict[str, float] = {}
        self.accepted: dict[str, float] = {}
        self.refused: dict[str, str] = {}

    async def offer(self, key: str) -> None:
        self.sent[key] = time.time()
        try:
            await self._submit(key)
        except Exception as error:  # a refused offer is a figure, not the end of the run
            del self.sent[key]
            self.refused[key] = f"{type(error).__name__}: {error}"
            return
        self.accepted[key] = time.time()


async def saturate(offers: Offers, keys: list[str], offer_s: float) -> None:
    """Keys offered as fast as the system accepts them, for at most ``offer_s``."""
    queue = iter(keys)
    deadline = time.monotonic() + offer_s

    async def lane() -> None:
        for key in queue:
            if time.monotonic() > deadline:
                return
            await offers.offer(key)

    await asyncio.gather(*(lane() for _ in range(IN_FLIGHT)))


async def paced(offers: Offers, keys: list[str], rate: float) -> None:
    """Key i offered at start + i/rate, whether or not earlier offers were accepted yet."""
    tasks: list[asyncio.Task[None]] = []
    start = time.monotonic()
    for i, key in enumerate(keys):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(offers.offer(key)))
    await asyncio.gather(*tasks)


async def until(
    check: Callable[[], Awaitable[bool]], timeout_s: float, interval_s: float = 0.5
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


class System(abc.ABC):
    """What a driver needs from one system; run keys double as order ids."""

    @abc.abstractmethod
    async def submit(self, steps: int, key: str) -> None: ...

    @abc.abstractmethod
    async def finished(self, steps: int, prefix: str, count: int) -> tuple[int, int]:
        """(runs completed, runs failed) among the ``count`` keys that start with ``prefix``."""

    @abc.abstractmethod
    async def completions(self, steps: int, prefix: str) -> dict[str, float]:
        """key -> wall clock at which the engine recorded the run complete."""


async def run_phase(
    system: System, steps: int, prefix: str, spec: dict[str, Any]
) -> dict[str, Any]:
    """Offer one phase's runs, wait up to its ``timeout_s`` after the last offer, measure."""
    keys = run_keys(prefix, spec["count"])
    offers = Offers(lambda key: system.submit(steps, key))
    started = time.monotonic()
    if spec["rate"]:
        await paced(offers, keys, spec["rate"])
    else:
        await saturate(offers, keys, spec["offer_s"] or 1e9)
    count = len(offers.sent)
    counts = [0, 0]

    async def settled() -> bool:
        counts[:] = await system.finished(steps, prefix, count)
        return counts[0] + counts[1] >= count

    complete = await until(settled, spec["timeout_s"])
    figures: dict[str, Any] = job.phase_figures(
        offers.sent, await system.completions(steps, prefix), offers.accepted
    )
    figures.update(
        offered=len(keys),
        accepted=count,
        refused=len(offers.refused),
        failed=counts[1],
        prefix=prefix,
        complete=complete and counts[1] == 0 and not offers.refused and count == len(keys),
        seconds=time.monotonic() - started,
    )
    if offers.refused:
        figures["refused_example"] = next(iter(offers.refused.values()))[:300]
    if spec["rate"]:
        figures["offered_per_s"] = spec["rate"]
    else:
        figures["own_runs_per_s"] = figures.get("runs_per_s", 0.0)
        figures["runs_per_s"] = await _window_rate(
            system, steps, prefix, min(offers.sent.values(), default=0)
        )
    return figures


async def _window_rate(system: System, steps: int, prefix: str, since: float) -> float:
    """Runs of this shape (any phase's) the system completed from ``since`` on, per second."""
    shape_prefix = prefix.rsplit("-", 1)[0]
    done = [t for t in (await system.completions(steps, shape_prefix)).values() if t >= since]
    return len(done) / (max(done) - since) if done and max(done) > since else 0.0


async def run_phases(
    system: System, name: str, steps: int, phases: list[dict[str, Any]], warmup: int
) -> dict[str, Any]:
    """A warm-up, then ``phases`` in order.

    The warm-up is offered at the fixed rate when there is one, as the measured phase will
    be, and drained before that phase starts: every connection, cache and code path it
    uses has been through it once (a burst of 20 left most of a pool's connections cold,
    and the first second of the phase paid for them)."""
    shape = f"{steps}step"
    if warmup:
        rate = next((spec["rate"] for spec in phases if spec.get("rate")), None)
        warm: dict[str, Any] = {"count": warmup, "rate": rate, "offer_s": 60, "timeout_s": 60}
        await run_phase(system, steps, f"{name}-{shape}-warmup", warm)
    figures: dict[str, Any] = {}
    for spec in phases:
        prefix = f"{name}-{shape}-{spec['phase']}"
        figures[spec["phase"]] = result = await run_phase(system, steps, prefix, spec)
        log(f"{prefix}: {result}")
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
