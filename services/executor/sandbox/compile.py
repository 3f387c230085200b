"""Upload-time compilation, in a spawned child process bounded in time and memory.

Wasmtime does not defend against compile-time DoS: 120 KB of nested loops
takes ~30 s and gigabytes to compile. So compilation runs in a child
started with the *spawn* method (a forked child of a threaded, wasmtime-
using parent can hang), capped by RLIMIT_AS and killed at a wall-clock
bound. The child checks the ABI, instantiates the module once (its start
function and data segments are deterministic, so a module that cannot be
instantiated is refused now rather than failing every run), and returns
the serialized artifact. Seal it (`seal.seal`, context = its SHA-256)
before it is stored anywhere.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import multiprocessing
import os
import resource
import signal
from dataclasses import dataclass
from multiprocessing.connection import Connection

from wasmtime import Engine, Module, WasmtimeError

from .engine import EpochTicker, new_engine
from .inspect import scan_binary
from .limits import DEFAULT_LIMITS, Limits, MiB
from .result import ModuleRejected, RejectionKind
from .run import Runner, describe_error, runnable_from_module

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_BYTES = 1024 * MiB
"""Address space the child may add to its baseline (interpreter, wasmtime, pool reservation)."""
_MAX_HEADER = 64 * 1024
_MAX_ARTIFACT = 512 * MiB


@dataclass(frozen=True, slots=True)
class CompiledModule:
    """A module that passed every upload check, with its (unsealed) artifact."""

    sha256: str
    size: int
    artifact: bytes
    has_alloc: bool


def compile_in_process(
    wasm: bytes, limits: Limits = DEFAULT_LIMITS, *, engine: Engine | None = None
) -> CompiledModule:
    """Scan, compile, check and trial-instantiate `wasm` here. Unbounded: use in a child."""
    scan_binary(wasm, limits)
    engine = engine or new_engine(limits)
    try:
        module = Module(engine, wasm)
    except WasmtimeError as error:
        raise ModuleRejected(
            RejectionKind.INVALID, f"invalid WebAssembly: {describe_error(error)}"
        ) from None
    runnable = runnable_from_module(module, limits=limits)
    with EpochTicker(engine, limits.epoch_tick_seconds):
        failure = Runner(engine, limits).try_instantiate(runnable)
    if failure is not None:
        raise ModuleRejected(
            RejectionKind.INSTANTIATION,
            f"the module cannot be instantiated ({failure.reason.value}): {failure.message}",
        )
    return CompiledModule(
        sha256=hashlib.sha256(wasm).hexdigest(),
        size=len(wasm),
        artifact=bytes(module.serialize()),
        has_alloc=runnable.abi.has_alloc,
    )


def compile_module(
    wasm: bytes,
    *,
    limits: Limits = DEFAULT_LIMITS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
) -> CompiledModule:
    """Compile in a spawned child; `ModuleRejected` for anything that must not be stored.

    Blocks for up to `timeout_s` (which includes the child's ~0.3 s start):
    from asyncio use `compile_module_async`.
    """
    scan_binary(wasm, limits)  # cheap refusals need no process
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(
        target=_child_main,
        args=(sender, wasm, limits, memory_bytes),
        name="wasm-compile",
        daemon=True,
    )
    child.start()
    sender.close()
    try:
        if not receiver.poll(timeout_s):
            child.kill()
            raise ModuleRejected(
                RejectionKind.COMPILE_TIMEOUT,
                f"compilation took longer than {timeout_s:g} s; the module is too complex",
            )
        try:
            header = json.loads(receiver.recv_bytes(_MAX_HEADER))
            artifact = receiver.recv_bytes(_MAX_ARTIFACT) if header.get("ok") is True else b""
        except (EOFError, OSError, ValueError):
            child.join(1.0)
            raise _died(child.exitcode) from None
    finally:
        receiver.close()
        _reap(child)
    if header.get("ok") is not True:
        raise _rejection_from(header)
    return CompiledModule(
        sha256=hashlib.sha256(wasm).hexdigest(),  # computed here, not trusted from the child
        size=len(wasm),
        artifact=artifact,
        has_alloc=bool(header.get("has_alloc")),
    )


async def compile_module_async(
    wasm: bytes,
    *,
    limits: Limits = DEFAULT_LIMITS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
) -> CompiledModule:
    """`compile_module` on a thread: the event loop keeps serving while the child works."""
    return await asyncio.to_thread(
        compile_module, wasm, limits=limits, timeout_s=timeout_s, memory_bytes=memory_bytes
    )


def _rejection_from(header: dict[str, object]) -> ModuleRejected:
    """Rebuild the child's refusal, treating its fields as untrusted text."""
    try:
        kind = RejectionKind(str(header.get("kind")))
    except ValueError:
        kind = RejectionKind.INVALID
    return ModuleRejected(kind, str(header.get("reason", "module refused"))[:500])


def _died(exitcode: int | None) -> ModuleRejected:
    """The child ended without a reply: out of memory (an allocation abort) or a crash."""
    if exitcode == -signal.SIGABRT:
        reason = "compilation exceeded its memory bound"
    else:
        reason = f"the compiler process died unexpectedly (exit code {exitcode})"
    return ModuleRejected(RejectionKind.COMPILE_RESOURCES, reason)


def _reap(child: multiprocessing.process.BaseProcess) -> None:
    child.join(0.5)
    if child.is_alive():
        child.kill()
        child.join()
    child.close()


def _cap_address_space(extra_bytes: int) -> None:
    """RLIMIT_AS = what the child maps now + `extra_bytes`."""
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = mapped + extra_bytes
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def _child_main(conn: Connection, wasm: bytes, limits: Limits, memory_bytes: int) -> None:
    """Child entry point. Replies with a JSON header (never pickle) and the raw artifact."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:
        # The engine's pool reservation is made before the cap so that only
        # the compiler's own allocations count against `memory_bytes`.
        engine = new_engine(limits)
        _cap_address_space(memory_bytes)
        compiled = compile_in_process(wasm, limits, engine=engine)
        header = {"ok": True, "has_alloc": compiled.has_alloc}
        conn.send_bytes(json.dumps(header).encode())
        conn.send_bytes(compiled.artifact)
    except ModuleRejected as rejected:
        conn.send_bytes(
            json.dumps(
                {"ok": False, "kind": rejected.kind.value, "reason": rejected.reason}
            ).encode()
        )
    except MemoryError:
        conn.send_bytes(
            json.dumps(
                {
                    "ok": False,
                    "kind": RejectionKind.COMPILE_RESOURCES.value,
                    "reason": "compilation exceeded its memory bound",
                }
            ).encode()
        )
    finally:
        conn.close()
