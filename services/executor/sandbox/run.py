"""One run of a guest: fresh store, fresh instance, input in, bounded output out.

Each run gets its own store with the SPEC limits (memory, table elements,
one instance, one table, one memory), the fuel budget and an epoch
deadline; the instance is created with no imports, so the guest can reach
nothing but its own memory. The store is deleted in a `finally` only after
the output bytes have been copied out, which is what keeps every raw
pointer below valid. Guest failures come back as typed `Failure`s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

from wasmtime import Engine, Module, Trap, TrapCode, WasmtimeError

from . import native
from .inspect import ModuleAbi, check_abi
from .limits import DEFAULT_LIMITS, WASM_PAGE, Limits
from .output import parse_output
from .result import (
    ArtifactError,
    Failure,
    FailureReason,
    Metrics,
    ModuleRejected,
    RunResult,
)
from .seal import unseal

_MEMORY: Final = native.ExportName("memory")
_EXECUTE: Final = native.ExportName("execute")
_ALLOC: Final = native.ExportName("alloc")
_U32: Final = 0xFFFFFFFF


@dataclass(frozen=True, slots=True, eq=False)
class Runnable:
    """A deserialized, ABI-checked module, instantiated afresh for every run."""

    module: Module
    abi: ModuleAbi
    sha256: str = ""


def load_runnable(
    engine: Engine, sealed: bytes, key: bytes, *, sha256: str, limits: Limits = DEFAULT_LIMITS
) -> Runnable:
    """Verify the seal, deserialize, re-check the ABI: the only way artifacts are loaded."""
    artifact = unseal(sealed, key, context=sha256)
    try:
        module = Module.deserialize(engine, artifact)
    except WasmtimeError as error:
        raise ArtifactError(
            f"artifact does not load into this engine: {describe_error(error)}"
        ) from None
    try:
        abi = check_abi(module, limits)
    except ModuleRejected as error:
        raise ArtifactError(f"artifact violates the guest ABI: {error.reason}") from None
    return Runnable(module, abi, sha256)


def runnable_from_module(
    module: Module, *, sha256: str = "", limits: Limits = DEFAULT_LIMITS
) -> Runnable:
    """Wrap a module compiled in this process (trusted bytes: tests, the compile child)."""
    return Runnable(module, check_abi(module, limits), sha256)


class Runner:
    """Runs guests on one engine, one at a time (not thread-safe: it reuses call buffers).

    The engine's epoch must be advanced by an `EpochTicker`, or the
    wall-clock deadline never fires.
    """

    def __init__(self, engine: Engine, limits: Limits = DEFAULT_LIMITS) -> None:
        self._engine = engine  # held: the store pointers below borrow it
        self._engine_ptr = engine.ptr()
        self._limits = limits
        self._ticks = limits.deadline_ticks
        self._calls = native.I32Calls()

    def _new_store(self) -> tuple[int, int]:
        limits = self._limits
        store = native.store_new(self._engine_ptr)
        try:
            context = native.store_context(store)
            native.store_limit(
                store, limits.memory_bytes, limits.table_elements, 1, limits.tables, limits.memories
            )
            native.set_fuel(context, limits.fuel)
            native.set_epoch_deadline(context, self._ticks)
        except BaseException:
            native.store_delete(store)
            raise
        return store, context

    def run(self, runnable: Runnable, envelope: bytes) -> RunResult:
        """Instantiate, place `envelope`, call `execute`, validate the output."""
        started = time.perf_counter_ns()
        limits = self._limits
        if len(envelope) > limits.memory_bytes:
            too_big = Failure(FailureReason.MEMORY_LIMIT, "the input is larger than linear memory")
            return RunResult(Metrics(0, _since(started), 0), failure=too_big)
        raw: bytes | Failure  # the output bytes, copied out before the store goes
        memory_bytes = 0
        store, context = self._new_store()
        try:
            memory: native.Memory | None = None
            phase = "instantiation"
            try:
                instance = native.instantiate(context, runnable.module.ptr())
                memory = native.get_memory(context, instance, _MEMORY)
                execute = native.get_func(context, instance, _EXECUTE)
                if memory is None or execute is None:
                    raise ArtifactError("instance lacks `memory` or `execute`")
                phase = "alloc"
                pointer = self._place_input(context, instance, memory, runnable, envelope)
                if isinstance(pointer, Failure):
                    raw = pointer
                else:
                    phase = "execute"
                    result = self._calls.call2(context, execute, pointer, len(envelope)) & _U32
                    raw = self._read_output(context, memory, result)
            except (Trap, WasmtimeError) as error:
                size = native.memory_size(context, memory) if memory is not None else 0
                raw = classify(error, phase, size, limits)
            if memory is not None:
                memory_bytes = native.memory_size(context, memory)
            fuel_used = limits.fuel - native.get_fuel(context)
        finally:
            native.store_delete(store)
        outcome = raw if isinstance(raw, Failure) else parse_output(raw)
        metrics = Metrics(fuel_used, _since(started), memory_bytes)
        if isinstance(outcome, Failure):
            return RunResult(metrics, failure=outcome)
        return RunResult(metrics, output=outcome)

    def try_instantiate(self, runnable: Runnable) -> Failure | None:
        """Instantiate once and throw the instance away: the upload-time trial.

        A module has no imports, so instantiation (data segments, the start
        function) is deterministic: one that fails here fails on every run.
        """
        store, context = self._new_store()
        try:
            native.instantiate(context, runnable.module.ptr())
        except (Trap, WasmtimeError) as error:
            return classify(error, "instantiation", 0, self._limits)
        finally:
            native.store_delete(store)
        return None

    def _place_input(
        self,
        context: int,
        instance: native.Instance,
        memory: native.Memory,
        runnable: Runnable,
        envelope: bytes,
    ) -> int | Failure:
        """Put the input where the guest expects it; return its address."""
        size = len(envelope)
        alloc = native.get_func(context, instance, _ALLOC) if runnable.abi.has_alloc else None
        if alloc is not None:
            pointer = self._calls.call1(context, alloc, size) & _U32
            if pointer == 0:
                return Failure(
                    FailureReason.MEMORY_LIMIT,
                    f"alloc({size}) returned 0: the module could not allocate its input",
                )
            available = native.memory_size(context, memory)
            if pointer + size > available:
                return Failure(
                    FailureReason.TRAP,
                    f"alloc({size}) returned {pointer:#x}, outside linear memory"
                    f" ({available} bytes)",
                )
        else:
            pages = -(-size // WASM_PAGE)
            previous = native.memory_grow(context, memory, pages)
            if previous is None:
                return Failure(
                    FailureReason.MEMORY_LIMIT,
                    f"no room for the {size}-byte input within the"
                    f" {self._limits.memory_bytes}-byte memory limit",
                )
            pointer = previous * WASM_PAGE
        # Base re-read here: alloc or grow may have moved memory.
        native.write(native.memory_base(context, memory) + pointer, envelope)
        return pointer

    def _read_output(self, context: int, memory: native.Memory, pointer: int) -> bytes | Failure:
        """Copy out the NUL-terminated output, reading at most limit + 1 bytes."""
        if pointer == 0:
            return Failure(
                FailureReason.REJECTED, "the module rejected its input (execute returned 0)"
            )
        size = native.memory_size(context, memory)
        if pointer >= size:
            return Failure(
                FailureReason.INVALID_OUTPUT,
                f"output pointer {pointer:#x} is outside linear memory ({size} bytes)",
            )
        limit = self._limits.output_bytes
        window = min(size - pointer, limit + 1)
        address = native.memory_base(context, memory) + pointer
        length = native.find_nul(address, window)
        if length < 0:
            if window > limit:
                return Failure(
                    FailureReason.OUTPUT_TOO_LARGE, f"output is larger than {limit} bytes"
                )
            return Failure(
                FailureReason.INVALID_OUTPUT,
                "output is not NUL-terminated before the end of linear memory",
            )
        return native.read(address, length)


def classify(error: Exception, phase: str, memory_bytes: int, limits: Limits) -> Failure:
    """Map a trap or error raised in `phase` to a typed failure.

    A trap taken with memory at its limit (it cannot grow one more page) is
    reported as MEMORY_LIMIT: guests turn a refused `memory.grow` into a
    trap of their own (`unreachable` in an allocator), and the limit is the
    cause worth reporting. Fuel, deadline and stack keep their own reasons.
    """
    code = error.trap_code if isinstance(error, Trap) else None
    if code is TrapCode.OUT_OF_FUEL:
        return Failure(
            FailureReason.FUEL_EXHAUSTED, f"{phase} used up its fuel ({limits.fuel} units)"
        )
    if code is TrapCode.INTERRUPT:
        return Failure(
            FailureReason.DEADLINE_EXCEEDED,
            f"{phase} ran past the {limits.deadline_seconds:g} s deadline",
        )
    if code is TrapCode.STACK_OVERFLOW:
        return Failure(
            FailureReason.STACK_OVERFLOW,
            f"{phase} overflowed the {limits.max_wasm_stack // 1024} KiB wasm stack",
        )
    if phase == "instantiation" and code is TrapCode.MEMORY_OUT_OF_BOUNDS:
        return Failure(
            FailureReason.MEMORY_LIMIT, "a data segment does not fit in the module's memory"
        )
    if memory_bytes + WASM_PAGE > limits.memory_bytes:
        return Failure(
            FailureReason.MEMORY_LIMIT,
            f"{phase} trapped with memory at its {limits.memory_bytes}-byte limit:"
            f" {describe_error(error)}",
        )
    return Failure(FailureReason.TRAP, f"{phase} trapped: {describe_error(error)}")


def describe_error(error: Exception) -> str:
    """The informative line of a wasmtime message, without its backtrace."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    for line in lines:
        if line.startswith("wasm trap:"):
            return line.removeprefix("wasm trap:").strip()[:200]
    caused = [line for line in lines if line[:1].isdigit() and ": " in line]
    text = caused[-1].split(": ", 1)[1] if caused else (lines[-1] if lines else "unknown error")
    return text[:200]


def _since(started_ns: int) -> int:
    return (time.perf_counter_ns() - started_ns) // 1000
