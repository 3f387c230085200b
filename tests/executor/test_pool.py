"""The worker-process pool: concurrency, isolation, artifact handling, worker loss."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from services.executor.sandbox.compile import compile_in_process
from services.executor.sandbox.pool import Pool
from services.executor.sandbox.result import (
    FailureReason,
    PoolClosed,
    RunResult,
    SealError,
    WorkerLost,
)
from services.executor.sandbox.seal import seal

from . import modules as m

KEY = os.urandom(32)


class Sealed:
    """A module compiled here and sealed the way the executor stores it.

    Each instance gets a unique export, hence its own SHA-256: the pool is
    shared across tests and caches modules by hash.
    """

    def __init__(self, wat: str) -> None:
        tag = f'(global (export "tag_{uuid.uuid4().hex}") i32 (i32.const 0))'
        unique = wat.rstrip().removesuffix(")") + tag + ")"
        compiled = compile_in_process(m.wasm(unique))
        self.sha256 = compiled.sha256
        self.sealed = seal(compiled.artifact, KEY, context=compiled.sha256)
        self.loads = 0

    async def loader(self) -> bytes:
        self.loads += 1
        return self.sealed


@pytest.fixture(scope="module")
async def pool() -> AsyncIterator[Pool]:
    async with Pool(KEY, workers=2) as pool:
        yield pool


def envelope(payload: object) -> bytes:
    document = {"payload": payload, "secrets": {}, "permissions": [], "action": "t"}
    return json.dumps(document).encode()


async def test_500_concurrent_runs_each_get_their_own_output(pool: Pool) -> None:
    echo = Sealed(m.ECHO_ALLOC)
    inputs = [envelope({"n": i, "pad": "x" * (i % 37)}) for i in range(500)]
    results = await asyncio.gather(*(pool.run(echo.sha256, echo.loader, e) for e in inputs))
    for sent, result in zip(inputs, results, strict=True):
        assert result.output is not None, result.failure
        assert result.output.data == json.loads(sent)
    assert echo.loads <= pool.size  # at most once per worker


async def test_no_state_survives_between_runs_in_a_worker(pool: Pool) -> None:
    counter = Sealed(m.COUNTER)
    results = await asyncio.gather(
        *(pool.run(counter.sha256, counter.sealed, envelope(i)) for i in range(100))
    )
    assert all(r.output is not None for r in results)
    assert {json.dumps(r.output.data) for r in results if r.output} == {
        '{"global": 1, "memory": 1}'
    }


async def test_hostile_runs_do_not_disturb_their_neighbours(pool: Pool) -> None:
    spin = Sealed(m.LOOP_IN_EXECUTE)
    recurse = Sealed(m.DEEP_RECURSION)
    echo = Sealed(m.ECHO)
    runs: list[asyncio.Future[RunResult]] = []
    for i in range(60):
        if i % 20 == 0:
            runs.append(asyncio.ensure_future(pool.run(spin.sha256, spin.sealed, envelope(i))))
            runs.append(
                asyncio.ensure_future(pool.run(recurse.sha256, recurse.sealed, envelope(i)))
            )
        runs.append(asyncio.ensure_future(pool.run(echo.sha256, echo.sealed, envelope(i))))
    results = await asyncio.gather(*runs)
    reasons = [r.failure.reason for r in results if r.failure is not None]
    assert sorted(reasons) == sorted(
        [FailureReason.FUEL_EXHAUSTED] * 3 + [FailureReason.STACK_OVERFLOW] * 3
    )
    echoed = [r.output.data["payload"] for r in results if r.output is not None]
    assert sorted(echoed) == list(range(60))


async def test_tampered_artifact_is_refused_then_a_good_one_works(pool: Pool) -> None:
    echo = Sealed(m.ECHO)
    tampered = bytearray(echo.sealed)
    tampered[-100] ^= 0xFF
    with pytest.raises(SealError):
        await pool.run(echo.sha256, bytes(tampered), envelope(1))
    result = await pool.run(echo.sha256, echo.sealed, envelope(2))
    assert result.output is not None and result.output.data["payload"] == 2


async def test_artifact_sealed_for_another_module_is_refused(pool: Pool) -> None:
    echo = Sealed(m.ECHO)
    counter = Sealed(m.COUNTER)
    with pytest.raises(SealError):
        await pool.run(counter.sha256, echo.sealed, envelope(1))


async def test_loader_runs_only_when_the_worker_lacks_the_module(pool: Pool) -> None:
    echo = Sealed(m.ECHO)
    for i in range(20):
        result = await pool.run(echo.sha256, echo.loader, envelope(i))
        assert result.ok
    assert 1 <= echo.loads <= pool.size


async def test_a_worker_that_lost_a_module_gets_it_resent(pool: Pool) -> None:
    # Make the parent believe every worker holds a module none has seen: the
    # first request goes without the artifact, the worker answers `missing`.
    echo = Sealed(m.ECHO)
    for handle in pool._handles:
        handle.known[echo.sha256] = None
    result = await pool.run(echo.sha256, echo.loader, envelope(7))
    assert result.output is not None and result.output.data["payload"] == 7
    assert echo.loads == 1


async def test_results_carry_metrics(pool: Pool) -> None:
    counter = Sealed(m.COUNTER)
    result = await pool.run(counter.sha256, counter.sealed, envelope(0))
    assert result.metrics.fuel_used > 0
    assert result.metrics.duration_us > 0
    assert result.metrics.peak_memory_bytes == 2 * 65536


async def test_killed_worker_fails_its_request_and_is_replaced() -> None:
    async with Pool(KEY, workers=1) as pool:
        slow = Sealed(m.MEMORY_GROW_LOOP)  # runs ~1 s before the deadline stops it
        echo = Sealed(m.ECHO)
        (victim,) = pool.worker_pids()
        running = asyncio.ensure_future(pool.run(slow.sha256, slow.sealed, envelope(0)))
        await asyncio.sleep(0.3)
        os.kill(victim, signal.SIGKILL)
        with pytest.raises(WorkerLost):
            await running
        result = await pool.run(echo.sha256, echo.sealed, envelope(1))
        assert result.output is not None and result.output.data["payload"] == 1
        assert pool.worker_pids() and pool.worker_pids() != [victim]


async def test_close_stops_workers_and_refuses_new_runs() -> None:
    pool = await Pool(KEY, workers=2).start()
    processes = [h.process for h in pool._handles]
    echo = Sealed(m.ECHO)
    assert (await pool.run(echo.sha256, echo.sealed, envelope(0))).ok
    started = time.monotonic()
    await pool.close()
    assert time.monotonic() - started < 5
    assert not any(p.is_alive() for p in processes)
    with pytest.raises(PoolClosed):
        await pool.run(echo.sha256, echo.sealed, envelope(1))
