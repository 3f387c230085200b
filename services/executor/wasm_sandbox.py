"""The executor's Sandbox: compile once per digest, run in the worker pool.

Modules are compiled in a bounded child process (a compile bomb costs that
child, not the service), sealed with this process's key, and kept in a
small LRU by SHA-256; workers deserialize only sealed artifacts.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from services.executor.execution import GuestRun
from services.executor.sandbox import (
    ModuleRejected,
    Pool,
    RejectionKind,
    RunResult,
    compile_module_async,
    seal,
)

CACHE_ENTRIES = 256


class WasmSandbox:
    def __init__(self, workers: int = 0) -> None:
        self._key = secrets.token_bytes(32)
        self._pool = Pool(self._key, workers=workers or None)
        self._sealed: OrderedDict[str, bytes] = OrderedDict()
        self._compiling: dict[str, asyncio.Task[bytes]] = {}

    async def start(self) -> None:
        await self._pool.start()

    async def close(self) -> None:
        await self._pool.close()

    async def validate(self, wasm: bytes) -> str | None:
        try:
            await self._sealed_artifact(hashlib.sha256(wasm).hexdigest(), wasm)
        except ModuleRejected as rejection:
            return rejection.reason
        return None

    async def run(
        self, sha256: str, load: Callable[[], Awaitable[bytes]], envelope: bytes
    ) -> GuestRun:
        async def artifact() -> bytes:
            cached = self._cached(sha256)
            if cached is not None:
                return cached
            wasm = await load()
            if hashlib.sha256(wasm).hexdigest() != sha256:
                raise ModuleRejected(
                    RejectionKind.INVALID, "the module fetched does not match its SHA-256"
                )
            return await self._sealed_artifact(sha256, wasm)

        try:
            result = await self._pool.run(sha256, artifact, envelope)
        except ModuleRejected as rejection:
            return GuestRun(ok=False, reason="TRAP", message=f"module refused: {rejection.reason}")
        return _guest_run(result)

    def _cached(self, sha256: str) -> bytes | None:
        sealed = self._sealed.get(sha256)
        if sealed is not None:
            self._sealed.move_to_end(sha256)
        return sealed

    async def _sealed_artifact(self, sha256: str, wasm: bytes) -> bytes:
        """Compile once even when many runs miss the cache at the same moment."""
        cached = self._cached(sha256)
        if cached is not None:
            return cached
        task = self._compiling.get(sha256)
        if task is None:
            task = asyncio.create_task(self._compile(sha256, wasm))
            self._compiling[sha256] = task
            task.add_done_callback(lambda _: self._compiling.pop(sha256, None))
        return await asyncio.shield(task)

    async def _compile(self, sha256: str, wasm: bytes) -> bytes:
        compiled = await compile_module_async(wasm)
        sealed = seal(compiled.artifact, self._key, context=sha256)
        self._sealed[sha256] = sealed
        while len(self._sealed) > CACHE_ENTRIES:
            self._sealed.popitem(last=False)
        return sealed


def _guest_run(result: RunResult) -> GuestRun:
    m = result.metrics
    if result.failure is not None:
        return GuestRun(
            ok=False,
            reason=result.failure.reason.value,
            message=result.failure.message,
            fuel_used=m.fuel_used,
            duration_us=m.duration_us,
            peak_memory_bytes=m.peak_memory_bytes,
        )
    assert result.output is not None
    out = result.output
    projection = None
    if out.projection is not None:
        p = out.projection
        projection = {
            "name": p.name,
            "entity_type": p.entity_type,
            "entity_id": p.entity_id,
            "title": p.title,
            "status": p.status,
            "data": p.data,
        }
    derived = None
    if out.derived_event is not None:
        derived = {"type": out.derived_event.type, "payload": out.derived_event.payload}
    return GuestRun(
        ok=True,
        output=out.data,
        projection=projection,
        derived_event=derived,
        fuel_used=m.fuel_used,
        duration_us=m.duration_us,
        peak_memory_bytes=m.peak_memory_bytes,
    )
