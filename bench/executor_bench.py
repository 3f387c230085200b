"""Executor sandbox benchmark: per-run cost against the raw wasmtime-py floor, and scaling.

Run with `python -m bench.executor_bench` (prints a table; `run_bench()`
returns the figures). Targets from issue 3: the worker's per-run cost at
most 1.5x the leanest raw wasmtime-py path, and two worker processes at
least 1.8x the throughput of one.

Everything guest-related is measured inside spawned worker processes, as
in production. "Per run" is what a worker does for one request: fresh
store + instance, input placement, call, bounded output read, JSON parse
and contract validation, metrics. The floor does the same wasm work with
nothing else: raw C calls and a bounded read, no parse, no checks.
"""

from __future__ import annotations

import asyncio
import ctypes
import importlib.metadata
import json
import multiprocessing
import os
import statistics
import sys
import time
from ctypes import POINTER, byref
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from typing import Any

TRIVIAL = r"""
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"ok\":true}\00")
  (func (export "alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "execute") (param i32 i32) (result i32) (i32.const 16)))
"""
LOOP = """
(module
  (memory (export "memory") 1)
  (func (export "execute") (param i32 i32) (result i32) (loop $spin (br $spin)) (i32.const 0)))
"""
ENVELOPE = json.dumps(
    {"payload": {"order": "o-1", "amount": 12}, "secrets": {}, "permissions": [], "action": "b"}
).encode()


def _percentile(samples: list[int], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] / 1000


def _floor_runner(engine: Any, module: Any, envelope: bytes = ENVELOPE) -> Any:
    """The leanest raw wasmtime-py path for the same call (no parse, no checks)."""
    from wasmtime import _ffi as ffi

    from services.executor.sandbox import native
    from services.executor.sandbox.limits import DEFAULT_LIMITS as L

    libc = ctypes.CDLL(None)
    memchr = libc.memchr
    memchr.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    memchr.restype = ctypes.c_void_p
    engine_ptr, module_ptr = engine.ptr(), module.ptr()
    names = [(n.encode(), len(n)) for n in ("memory", "alloc", "execute")]
    args = (ffi.wasmtime_val_t * 2)()
    args[0].kind = args[1].kind = ffi.WASMTIME_I32
    results = (ffi.wasmtime_val_t * 1)()
    trap = POINTER(ffi.wasm_trap_t)()
    size = len(envelope)
    ticks = L.deadline_ticks

    def once() -> bytes:
        store = native._store_new(engine_ptr, None, None)
        ctx = native._store_context(store)
        native._store_limiter(store, L.memory_bytes, L.table_elements, 1, 1, 1)
        native._set_fuel(ctx, L.fuel)
        native._set_epoch_deadline(ctx, ticks)
        instance = ffi.wasmtime_instance_t()
        native._instance_new(ctx, module_ptr, None, 0, byref(instance), byref(trap))
        memory, alloc, execute = (ffi.wasmtime_extern_t() for _ in range(3))
        native._export_get(ctx, byref(instance), *names[0], byref(memory))
        native._export_get(ctx, byref(instance), *names[1], byref(alloc))
        native._export_get(ctx, byref(instance), *names[2], byref(execute))
        args[0].of.i32 = size
        native._func_call(ctx, byref(alloc.of.func), args, 1, results, 1, byref(trap))
        pointer = results[0].of.i32 & 0xFFFFFFFF
        base = native._memory_data(ctx, byref(memory.of.memory))
        ctypes.memmove(base + pointer, envelope, size)
        args[0].of.i32, args[1].of.i32 = pointer, size
        native._func_call(ctx, byref(execute.of.func), args, 2, results, 1, byref(trap))
        out = results[0].of.i32 & 0xFFFFFFFF
        length = native._memory_data_size(ctx, byref(memory.of.memory))
        base = native._memory_data(ctx, byref(memory.of.memory))
        end = memchr(base + out, 0, min(length - out, L.output_bytes + 1))
        raw = ctypes.string_at(base + out, end - base - out)
        native._store_delete(store)
        return raw

    return once


def _latency_worker(conn: Connection, runs: int) -> None:
    """In one worker process: per-run latency of the sandbox and of the floor."""
    from wasmtime import Module

    from services.executor.sandbox.engine import EpochTicker, new_engine
    from services.executor.sandbox.run import Runner, runnable_from_module

    engine = new_engine()
    with EpochTicker(engine, 0.1):
        runner = Runner(engine)
        runnable = runnable_from_module(Module(engine, TRIVIAL))
        floor = _floor_runner(engine, runnable.module)
        assert runner.run(runnable, ENVELOPE).ok and floor() == b'{"ok":true}'
        ours: list[int] = []
        raw: list[int] = []
        clock = time.perf_counter_ns
        rounds = 10
        for _ in range(rounds):  # interleaved, so drift hits both alike
            for _ in range(500):
                runner.run(runnable, ENVELOPE)
                floor()
            for _ in range(runs // rounds):
                started = clock()
                runner.run(runnable, ENVELOPE)
                ours.append(clock() - started)
            for _ in range(runs // rounds):
                started = clock()
                floor()
                raw.append(clock() - started)
        loop = runnable_from_module(Module(engine, LOOP))
        stops = []
        for _ in range(5):
            started = clock()
            result = runner.run(loop, ENVELOPE)
            stops.append(clock() - started)
            assert result.failure is not None and result.failure.reason == "FUEL_EXHAUSTED"
    conn.send(
        {
            "run_p50_us": _percentile(ours, 0.50),
            "run_p99_us": _percentile(ours, 0.99),
            "floor_p50_us": _percentile(raw, 0.50),
            "floor_p99_us": _percentile(raw, 0.99),
            "fuel_stop_ms": statistics.median(stops) / 1e6,
        }
    )


def _throughput_worker(conn: Connection, barrier: Barrier, runs: int) -> None:
    """Runs `runs` trivial actions back to back once every worker is ready."""
    from wasmtime import Module

    from services.executor.sandbox.engine import EpochTicker, new_engine
    from services.executor.sandbox.run import Runner, runnable_from_module

    engine = new_engine()
    with EpochTicker(engine, 0.1):
        runner = Runner(engine)
        runnable = runnable_from_module(Module(engine, TRIVIAL))
        for _ in range(2000):
            runner.run(runnable, ENVELOPE)
        barrier.wait()
        started = time.perf_counter()
        for _ in range(runs):
            runner.run(runnable, ENVELOPE)
        conn.send((started, time.perf_counter()))


def _spawn(target: Any, *args: Any) -> tuple[multiprocessing.process.BaseProcess, Connection]:
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=target, args=(sender, *args), daemon=True)
    process.start()
    sender.close()
    return process, receiver


def _processes_throughput(count: int, runs: int) -> float:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(count)
    spawned = [_spawn(_throughput_worker, barrier, runs) for _ in range(count)]
    spans = [receiver.recv() for _, receiver in spawned]
    for process, _ in spawned:
        process.join()
    wall = max(end for _, end in spans) - min(start for start, _ in spans)
    return count * runs / wall


async def _pool_throughput(count: int, runs: int) -> float:
    from services.executor.sandbox import Pool, compile_in_process, seal

    key = os.urandom(32)
    compiled = compile_in_process(_wasm(TRIVIAL))
    sealed = seal(compiled.artifact, key, context=compiled.sha256)
    async with Pool(key, workers=count) as pool:
        warm = [pool.run(compiled.sha256, sealed, ENVELOPE) for _ in range(2000)]
        await asyncio.gather(*warm)
        started = time.perf_counter()
        for _ in range(runs // 500):
            batch = [pool.run(compiled.sha256, sealed, ENVELOPE) for _ in range(500)]
            await asyncio.gather(*batch)
        return (runs // 500 * 500) / (time.perf_counter() - started)


def _wasm(wat: str) -> bytes:
    from wasmtime import wat2wasm

    return bytes(wat2wasm(wat))


def run_bench(runs: int = 20_000, throughput_runs: int = 40_000, trials: int = 3) -> dict[str, Any]:
    """Measure, print the table, and return the figures."""
    process, receiver = _spawn(_latency_worker, runs)
    figures: dict[str, Any] = dict(receiver.recv())
    process.join()
    # Best of `trials`: the machine is shared, and interference only ever slows a trial.
    figures["runs_per_s_1_process"] = max(
        _processes_throughput(1, throughput_runs) for _ in range(trials)
    )
    figures["runs_per_s_2_processes"] = max(
        _processes_throughput(2, throughput_runs) for _ in range(trials)
    )
    figures["pool_runs_per_s_1_worker"] = asyncio.run(_pool_throughput(1, throughput_runs // 2))
    figures["pool_runs_per_s_2_workers"] = asyncio.run(_pool_throughput(2, throughput_runs // 2))
    figures["cost_vs_floor"] = figures["run_p50_us"] / figures["floor_p50_us"]
    figures["scaling_2_processes"] = (
        figures["runs_per_s_2_processes"] / figures["runs_per_s_1_process"]
    )
    figures["pool_scaling_2_workers"] = (
        figures["pool_runs_per_s_2_workers"] / figures["pool_runs_per_s_1_worker"]
    )
    _print_table(figures)
    return figures


def _print_table(f: dict[str, Any]) -> None:
    def verdict(ok: bool) -> str:
        return "ok" if ok else "MISSED"

    rows = [
        (
            "per-run cost in a worker, p50 / p99",
            f"{f['run_p50_us']:.1f} / {f['run_p99_us']:.1f} µs",
            "",
        ),
        (
            "raw wasmtime-py floor, p50 / p99",
            f"{f['floor_p50_us']:.1f} / {f['floor_p99_us']:.1f} µs",
            "",
        ),
        (
            "per-run cost / floor (p50)",
            f"{f['cost_vs_floor']:.2f}x",
            f"<= 1.5x {verdict(f['cost_vs_floor'] <= 1.5)}",
        ),
        ("runs/s, 1 worker process", f"{f['runs_per_s_1_process']:,.0f}", ""),
        ("runs/s, 2 worker processes", f"{f['runs_per_s_2_processes']:,.0f}", ""),
        (
            "2-process scaling",
            f"{f['scaling_2_processes']:.2f}x",
            f">= 1.8x {verdict(f['scaling_2_processes'] >= 1.8)}",
        ),
        ("runs/s through Pool.run, 1 worker", f"{f['pool_runs_per_s_1_worker']:,.0f}", ""),
        ("runs/s through Pool.run, 2 workers", f"{f['pool_runs_per_s_2_workers']:,.0f}", ""),
        (
            "Pool.run scaling, 2 workers",
            f"{f['pool_scaling_2_workers']:.2f}x",
            "(parent shares the cores)",
        ),
        ("infinite loop stopped by fuel", f"{f['fuel_stop_ms']:.1f} ms", ""),
    ]
    wasmtime_version = importlib.metadata.version("wasmtime")
    python_version = sys.version.split()[0]
    print(
        f"executor sandbox (wasmtime-py {wasmtime_version}, Python {python_version},"
        f" {os.cpu_count()} cores)"
    )
    width = max(len(name) for name, _, _ in rows)
    for name, value, target in rows:
        print(f"  {name:<{width}}  {value:>18}  {target}")


if __name__ == "__main__":
    run_bench()
