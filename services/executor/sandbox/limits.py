"""The per-run limits of SPEC §6, in one frozen value shared by every layer.

The compile subprocess, the engine configuration, the ABI check and each run
read the same `Limits`, so a module accepted at upload is judged by exactly
the rules it will later run under.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

KiB = 1024
MiB = 1024 * KiB
WASM_PAGE = 64 * KiB


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource bounds for one module and one run (defaults are the SPEC values)."""

    fuel: int = 50_000_000
    """Instruction budget per run; runaway code stops with FUEL_EXHAUSTED."""
    max_wasm_stack: int = 512 * KiB
    """Bytes of native stack guest code may use before STACK_OVERFLOW."""
    memory_bytes: int = 10 * MiB
    """Largest linear memory; growth past it fails (memory.grow returns -1)."""
    memory_guard_bytes: int = 2 * MiB
    """Unmapped guard region after linear memory (elides some bounds checks)."""
    output_bytes: int = 256 * KiB
    """Largest output document, excluding its NUL terminator."""
    memories: int = 1
    tables: int = 1
    table_elements: int = 10_000
    exports: int = 64
    """Export cap: wasmtime-py's `Instance.exports()` is quadratic in this."""
    module_bytes: int = 8 * MiB
    deadline_seconds: float = 1.0
    """Wall-clock backstop (epoch interruption) for work fuel underprices."""
    epoch_tick_seconds: float = 0.1
    """Ticker period; the deadline is enforced to within one tick (late, never early)."""

    def __post_init__(self) -> None:
        if self.memory_bytes % WASM_PAGE:
            raise ValueError("memory_bytes must be a whole number of 64 KiB pages")
        if self.epoch_tick_seconds <= 0 or self.deadline_seconds <= 0:
            raise ValueError("deadline and tick must be positive")
        for name in ("fuel", "max_wasm_stack", "output_bytes", "table_elements", "exports"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")

    @property
    def memory_pages(self) -> int:
        """The memory limit in 64 KiB WebAssembly pages."""
        return self.memory_bytes // WASM_PAGE

    @property
    def deadline_ticks(self) -> int:
        """Epoch ticks to allow a run: one extra so the deadline is never cut short.

        An epoch deadline is relative to the engine's current epoch, and the
        next tick may come at any moment after the run starts; with N + 1
        ticks the guest gets between N and N + 1 tick periods.
        """
        ratio = self.deadline_seconds / self.epoch_tick_seconds
        return math.ceil(ratio - 1e-9) + 1


DEFAULT_LIMITS = Limits()
