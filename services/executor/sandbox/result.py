"""Values and errors shared by the sandbox layers.

A guest failure is a *result* (`RunResult` with a `Failure`), because the
orchestrator records it on the step like any other outcome. Host-side
problems — a module refused at upload, a tampered artifact, a lost worker —
are exceptions, because no step outcome can be derived from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class FailureReason(StrEnum):
    """Why a run failed (SPEC §6); the names are part of the public contract."""

    FUEL_EXHAUSTED = "FUEL_EXHAUSTED"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    MEMORY_LIMIT = "MEMORY_LIMIT"
    STACK_OVERFLOW = "STACK_OVERFLOW"
    TRAP = "TRAP"
    REJECTED = "REJECTED"
    OUTPUT_TOO_LARGE = "OUTPUT_TOO_LARGE"
    INVALID_OUTPUT = "INVALID_OUTPUT"


@dataclass(frozen=True, slots=True)
class Failure:
    """A typed guest failure; `message` is for humans and never holds input data."""

    reason: FailureReason
    message: str


@dataclass(frozen=True, slots=True)
class Projection:
    """The validated `projection` output key.

    `entity_id` is text: a numeric id is kept in its JSON spelling so the
    upsert key compares the same however the orchestrator stores it.
    """

    name: str
    entity_type: str | None = None
    entity_id: str | None = None
    title: str | None = None
    status: str | None = None
    data: Any = None

    @property
    def keyed(self) -> bool:
        """True: upsert on (name, entity_type, entity_id). False: append a row."""
        return self.entity_type is not None and self.entity_id is not None


@dataclass(frozen=True, slots=True)
class DerivedEvent:
    """The validated `derived_event` output key (an event to emit in the same tenant)."""

    type: str
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ActionOutput:
    """A validated output document: reserved keys parsed, every other key in `data`."""

    data: dict[str, Any]
    projection: Projection | None = None
    derived_event: DerivedEvent | None = None
    """None when absent or `false` (both mean: emit nothing)."""


@dataclass(frozen=True, slots=True)
class Metrics:
    """What a run cost; reported for failures as well as successes."""

    fuel_used: int
    """Exact for runs that return and for FUEL_EXHAUSTED (the whole budget). When a
    trap or the deadline cuts a run short it is a lower bound: wasmtime keeps the
    counter in a register and does not write it back on a trap (wasmtime#13802)."""
    duration_us: int
    peak_memory_bytes: int


@dataclass(frozen=True, slots=True)
class RunResult:
    """The outcome of one run: exactly one of `output` and `failure` is set."""

    metrics: Metrics
    output: ActionOutput | None = None
    failure: Failure | None = None

    def __post_init__(self) -> None:
        if (self.output is None) == (self.failure is None):
            raise ValueError("a RunResult has exactly one of output and failure")

    @property
    def ok(self) -> bool:
        return self.failure is None

    def to_wire(self) -> dict[str, Any]:
        """A JSON-safe form, used between worker processes and the pool.

        JSON rather than pickle: the worker runs hostile code, so what it
        sends back is decoded as data only.
        """
        m = self.metrics
        wire: dict[str, Any] = {"m": [m.fuel_used, m.duration_us, m.peak_memory_bytes]}
        if self.failure is not None:
            wire["f"] = [self.failure.reason.value, self.failure.message]
            return wire
        assert self.output is not None
        out = self.output
        wire["d"] = out.data
        if out.projection is not None:
            p = out.projection
            wire["p"] = [p.name, p.entity_type, p.entity_id, p.title, p.status, p.data]
        if out.derived_event is not None:
            wire["e"] = [out.derived_event.type, out.derived_event.payload]
        return wire

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> RunResult:
        fuel, duration, memory = wire["m"]
        metrics = Metrics(int(fuel), int(duration), int(memory))
        if "f" in wire:
            reason, message = wire["f"]
            return cls(metrics, failure=Failure(FailureReason(reason), str(message)))
        projection = Projection(*wire["p"]) if "p" in wire else None
        event = DerivedEvent(*wire["e"]) if "e" in wire else None
        return cls(metrics, output=ActionOutput(wire["d"], projection, event))


class SandboxError(Exception):
    """Base of the host-side errors of the sandbox package."""


class RejectionKind(StrEnum):
    """Why a module was refused at upload (all map to INVALID_ARGUMENT)."""

    NOT_WASM = "NOT_WASM"
    TOO_LARGE = "TOO_LARGE"
    INVALID = "INVALID"
    ABI = "ABI"
    LIMITS = "LIMITS"
    INSTANTIATION = "INSTANTIATION"
    COMPILE_TIMEOUT = "COMPILE_TIMEOUT"
    COMPILE_RESOURCES = "COMPILE_RESOURCES"


class ModuleRejected(SandboxError):
    """A module that must not be stored: `reason` is shown to the uploader."""

    def __init__(self, kind: RejectionKind, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


class SealError(SandboxError):
    """Artifact bytes whose MAC does not verify: never handed to wasmtime."""


class ArtifactError(SandboxError):
    """A correctly sealed artifact wasmtime refused (e.g. built for another engine)."""


class WorkerLost(SandboxError):
    """The worker process running a request exited before answering."""


class PoolClosed(SandboxError):
    """The pool was closed before or while the request ran."""
