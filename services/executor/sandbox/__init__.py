"""The WebAssembly sandbox of SPEC §6: compile and check at upload, run metered in workers.

Upload: `compile_module` (or `compile_module_async`) → `seal(artifact, key,
context=sha256)` → store the sealed bytes. Run: `Pool.run(sha256, sealed or
loader, envelope)` → `RunResult` (a validated output or a typed failure).
"""

from .compile import (
    CompiledModule,
    compile_in_process,
    compile_module,
    compile_module_async,
)
from .engine import EpochTicker, new_config, new_engine
from .inspect import check_abi, scan_binary
from .limits import DEFAULT_LIMITS, Limits
from .output import parse_output
from .pool import ArtifactLoader, Pool
from .result import (
    ActionOutput,
    ArtifactError,
    DerivedEvent,
    Failure,
    FailureReason,
    Metrics,
    ModuleRejected,
    PoolClosed,
    Projection,
    RejectionKind,
    RunResult,
    SandboxError,
    SealError,
    WorkerLost,
)
from .run import Runnable, Runner, load_runnable, runnable_from_module
from .seal import seal, unseal

__all__ = [
    "DEFAULT_LIMITS",
    "ActionOutput",
    "ArtifactError",
    "ArtifactLoader",
    "CompiledModule",
    "DerivedEvent",
    "EpochTicker",
    "Failure",
    "FailureReason",
    "Limits",
    "Metrics",
    "ModuleRejected",
    "Pool",
    "PoolClosed",
    "Projection",
    "RejectionKind",
    "RunResult",
    "Runnable",
    "Runner",
    "SandboxError",
    "SealError",
    "WorkerLost",
    "check_abi",
    "compile_in_process",
    "compile_module",
    "compile_module_async",
    "load_runnable",
    "new_config",
    "new_engine",
    "parse_output",
    "runnable_from_module",
    "scan_binary",
    "seal",
    "unseal",
]
