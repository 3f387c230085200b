"""Upload compilation in a spawned, time- and memory-bounded child process."""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import os
import time

import pytest

from services.executor.sandbox import compile as compile_mod
from services.executor.sandbox.compile import compile_module, compile_module_async
from services.executor.sandbox.engine import new_engine
from services.executor.sandbox.result import ModuleRejected, RejectionKind
from services.executor.sandbox.run import Runner, load_runnable
from services.executor.sandbox.seal import seal

from . import modules as m

KEY = os.urandom(32)


def test_compiles_in_a_child_and_the_artifact_runs_here() -> None:
    wasm = m.wasm(m.ECHO_ALLOC)
    compiled = compile_module(wasm)
    assert compiled.sha256 == hashlib.sha256(wasm).hexdigest()
    assert compiled.size == len(wasm)
    assert compiled.has_alloc
    # The child's engine and this one are configured identically.
    engine = new_engine()
    runnable = load_runnable(
        engine, seal(compiled.artifact, KEY, context=compiled.sha256), KEY, sha256=compiled.sha256
    )
    result = Runner(engine).run(runnable, b'{"payload":{"a":1}}')
    assert result.output is not None and result.output.data == {"payload": {"a": 1}}


@pytest.mark.parametrize(
    ("wat", "kind", "needle"),
    [
        (m.TYPE_ERROR, RejectionKind.INVALID, "type mismatch"),
        (m.DATA_OUT_OF_BOUNDS, RejectionKind.INSTANTIATION, "data segment"),
        (m.MEMORY_NOT_EXPORTED, RejectionKind.ABI, "`memory`"),
    ],
)
def test_refusals_found_in_the_child_come_back_typed(
    wat: str, kind: RejectionKind, needle: str
) -> None:
    with pytest.raises(ModuleRejected) as caught:
        compile_module(m.wasm(wat))
    assert caught.value.kind is kind
    assert needle in caught.value.reason


@pytest.mark.parametrize(
    ("wasm", "kind"),
    [
        (m.wasm(m.many_exports(100_000)), RejectionKind.ABI),
        (m.wasm(m.IMPORTS_FUNCTION), RejectionKind.ABI),
        (m.wasm(m.OVERSIZED_MEMORY), RejectionKind.LIMITS),
        (b"", RejectionKind.NOT_WASM),
        (b"\x00asm\x01\x00\x00\x00" + bytes(8 * 1024 * 1024), RejectionKind.TOO_LARGE),
    ],
)
def test_cheap_refusals_need_no_child(
    wasm: bytes, kind: RejectionKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_spawning(method: str) -> None:
        raise AssertionError("a child process was started")

    monkeypatch.setattr(compile_mod.multiprocessing, "get_context", no_spawning)
    started = time.monotonic()
    with pytest.raises(ModuleRejected) as caught:
        compile_module(wasm)
    assert caught.value.kind is kind
    assert time.monotonic() - started < 0.5


async def test_compile_bomb_times_out_without_blocking_the_caller() -> None:
    bomb = m.wasm(m.compile_bomb(15_000))  # ~30 s and many GiB to compile
    assert len(bomb) < 150_000
    ticks = 0

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    # Other tests' stacks may run sandbox workers: only this call's child must be gone.
    running = set(multiprocessing.active_children())
    beating = asyncio.create_task(heartbeat())
    started = time.monotonic()
    with pytest.raises(ModuleRejected) as caught:
        await compile_module_async(bomb, timeout_s=2.0)
    elapsed = time.monotonic() - started
    beating.cancel()
    assert caught.value.kind is RejectionKind.COMPILE_TIMEOUT
    assert 2.0 <= elapsed < 3.5
    assert ticks > 100  # the event loop kept running throughout
    assert set(multiprocessing.active_children()) <= running  # the child was killed and reaped


def test_compile_memory_bomb_hits_the_memory_bound() -> None:
    bomb = m.wasm(m.compile_bomb(5_000))  # ~1 GiB to compile
    running = set(multiprocessing.active_children())
    started = time.monotonic()
    with pytest.raises(ModuleRejected) as caught:
        compile_module(bomb, memory_bytes=256 * 1024 * 1024)
    assert caught.value.kind is RejectionKind.COMPILE_RESOURCES
    assert time.monotonic() - started < 5.0
    assert set(multiprocessing.active_children()) <= running
