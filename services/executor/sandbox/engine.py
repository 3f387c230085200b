"""The one wasmtime engine configuration, and the epoch ticker that drives deadlines.

Every engine — the compile subprocess's and each worker's — comes from
`new_engine`, because a serialized module only deserializes into an engine
configured the same way.
"""

from __future__ import annotations

import threading

from wasmtime import Config, Engine
from wasmtime import _ffi as ffi  # pooling allocator: not in the public wrapper

from .limits import DEFAULT_LIMITS, Limits

POOL_SLOTS = 8
"""Instances (and memories, tables) alive at once per engine.

A worker runs one guest at a time and closes its store straight after, so a
handful of slots suffices; each memory slot reserves (memory + guard) bytes
of address space up front.
"""

MEMORY_KEEP_RESIDENT = 64 * 1024
"""Bytes of a freed memory slot zeroed with memset instead of madvise (cheaper for small guests)."""


def new_config(limits: Limits = DEFAULT_LIMITS) -> Config:
    """A `Config` with metering, the SPEC limits, and only the proposals the ABI needs."""
    config = Config()
    config.strategy = "cranelift"
    config.cranelift_opt_level = "speed"
    # Replay must reproduce a run: make NaN bit patterns deterministic across hosts.
    config.cranelift_nan_canonicalization = True
    config.consume_fuel = True
    config.epoch_interruption = True
    config.max_wasm_stack = limits.max_wasm_stack
    # A fixed reservation the size of the limit: memory never moves and can never
    # exceed the limit even if a store limiter were missing.
    config.memory_reservation = limits.memory_bytes
    config.memory_guard_size = limits.memory_guard_bytes
    config.memory_reservation_for_growth = 0
    config.memory_may_move = False
    # One upload must not take every core: compilation runs single-threaded.
    config.parallel_compilation = False
    # Core wasm 2.0 (bulk memory, multi-value, reference types, SIMD) stays on;
    # everything beyond it is off. Custom page sizes would break page arithmetic.
    config.wasm_threads = False
    config.shared_memory = False
    config.wasm_memory64 = False
    config.wasm_multi_memory = False
    config.wasm_custom_page_sizes = False
    config.wasm_relaxed_simd = False
    config.wasm_tail_call = False
    config.wasm_exceptions = False
    config.wasm_function_references = False
    config.wasm_gc = False
    config.gc_support = False
    config.wasm_stack_switching = False
    config.wasm_wide_arithmetic = False
    config.wasm_component_model = False
    _use_pooling_allocator(config, limits)
    return config


def _use_pooling_allocator(config: Config, limits: Limits) -> None:
    """Pre-reserved instance slots: ~25% cheaper instantiation than on-demand mmap.

    The pool's per-module limits (one memory, one table, table elements,
    memory size) also make wasmtime refuse a non-conforming module at
    compile time, a second line behind the ABI check.
    """
    pooling = ffi.wasmtime_pooling_allocation_config_new()
    try:
        ffi.wasmtime_pooling_allocation_config_total_core_instances_set(pooling, POOL_SLOTS)
        ffi.wasmtime_pooling_allocation_config_total_memories_set(pooling, POOL_SLOTS)
        ffi.wasmtime_pooling_allocation_config_total_tables_set(pooling, POOL_SLOTS)
        ffi.wasmtime_pooling_allocation_config_total_stacks_set(pooling, 0)
        ffi.wasmtime_pooling_allocation_config_total_component_instances_set(pooling, 0)
        ffi.wasmtime_pooling_allocation_config_total_gc_heaps_set(pooling, 0)
        ffi.wasmtime_pooling_allocation_config_max_memories_per_module_set(pooling, limits.memories)
        ffi.wasmtime_pooling_allocation_config_max_tables_per_module_set(pooling, limits.tables)
        ffi.wasmtime_pooling_allocation_config_max_memory_size_set(pooling, limits.memory_bytes)
        ffi.wasmtime_pooling_allocation_config_table_elements_set(pooling, limits.table_elements)
        ffi.wasmtime_pooling_allocation_config_linear_memory_keep_resident_set(
            pooling, MEMORY_KEEP_RESIDENT
        )
        ffi.wasmtime_pooling_allocation_config_table_keep_resident_set(
            pooling, MEMORY_KEEP_RESIDENT
        )
        # The config copies the pooling settings; ours is freed below.
        ffi.wasmtime_pooling_allocation_strategy_set(config.ptr(), pooling)
    finally:
        ffi.wasmtime_pooling_allocation_config_delete(pooling)


def new_engine(limits: Limits = DEFAULT_LIMITS) -> Engine:
    return Engine(new_config(limits))


class EpochTicker:
    """One daemon thread per process advancing the engine epoch every tick.

    Runs set their deadline in ticks (`Limits.deadline_ticks`); a guest still
    running when the epoch passes it traps with INTERRUPT, which is how work
    that fuel underprices (failing memory.grow loops) is stopped. The thread
    sleeps between ticks, so it costs the guest-running thread no GIL time.
    """

    def __init__(self, engine: Engine, interval: float) -> None:
        self._engine = engine
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="wasm-epoch", daemon=True)

    def _tick(self) -> None:
        while not self._stop.wait(self._interval):
            self._engine.increment_epoch()

    def start(self) -> EpochTicker:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def __enter__(self) -> EpochTicker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
