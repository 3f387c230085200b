"""A pool of worker processes that run guests; the parent never runs guest code.

Why processes: two *threads* running short guests are 3-4x slower than
one (every ctypes call hands the GIL over), while two spawned processes
scale ~2x. Each worker keeps its own engine, epoch ticker and an LRU cache
of deserialized modules keyed by SHA-256, and runs one guest at a time.

Protocol (over a socketpair, length-prefixed frames): the parent sends
pickled batches of requests — it is the trusted side — and workers answer
with JSON only, since they host hostile code. Requests are pipelined and
coalesced per event-loop turn, so a burst of runs costs one write per
worker rather than one round trip per run. The parent tracks which modules
each worker probably holds and sends the sealed artifact only when it does
not; a worker that lacks it answers `missing` and the request is resent.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import logging
import multiprocessing
import os
import pickle
import signal
import socket
import struct
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, Final

from .engine import EpochTicker, new_engine
from .limits import DEFAULT_LIMITS, Limits
from .result import (
    ArtifactError,
    PoolClosed,
    RunResult,
    SandboxError,
    SealError,
    WorkerLost,
)
from .run import Runnable, Runner, load_runnable

log = logging.getLogger(__name__)

ArtifactLoader = Callable[[], Awaitable[bytes]]
"""Fetches a sealed artifact; called only when the chosen worker lacks the module."""

_FRAME: Final = struct.Struct("!Q")
_MAX_FRAME: Final = 1 << 31
_FLUSH_AFTER_S: Final = 0.002
"""A worker answers at least this often while working through a long batch."""
_START_TIMEOUT_S: Final = 60.0


@dataclass(frozen=True, slots=True)
class _WorkerConfig:
    limits: Limits
    key: bytes
    cache_size: int


# --------------------------------------------------------------------------- worker side


def _worker_main(sock: socket.socket, config: _WorkerConfig) -> None:
    """Worker process entry point: serve batches until the parent closes the socket."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when workers stop
    engine = new_engine(config.limits)
    ticker = EpochTicker(engine, config.limits.epoch_tick_seconds).start()
    worker = _Worker(engine, config)
    stream = sock.makefile("rb")
    try:
        _send_frame(sock, json.dumps([{"ready": os.getpid()}]).encode())
        gc.freeze()  # startup objects need no more collection passes
        while (batch := _read_frame(stream)) is not None:
            replies: list[dict[str, Any]] = []
            flushed = time.monotonic()
            for request in pickle.loads(batch):
                replies.append(worker.serve(*request))
                if time.monotonic() - flushed > _FLUSH_AFTER_S:
                    _send_frame(sock, json.dumps(replies).encode())
                    replies, flushed = [], time.monotonic()
            if replies:
                _send_frame(sock, json.dumps(replies).encode())
    except (BrokenPipeError, ConnectionResetError):
        pass  # the parent went away
    finally:
        ticker.stop()
        stream.close()
        sock.close()


class _Worker:
    def __init__(self, engine: Any, config: _WorkerConfig) -> None:
        self._engine = engine
        self._config = config
        self._runner = Runner(engine, config.limits)
        self._cache: OrderedDict[str, Runnable] = OrderedDict()

    def serve(
        self, request_id: int, sha256: str, sealed: bytes | None, envelope: bytes
    ) -> dict[str, Any]:
        runnable = self._cache.get(sha256)
        if runnable is None:
            if sealed is None:
                return {"id": request_id, "missing": True}
            try:
                runnable = load_runnable(
                    self._engine,
                    sealed,
                    self._config.key,
                    sha256=sha256,
                    limits=self._config.limits,
                )
            except SealError as error:
                return {"id": request_id, "error": ["seal", str(error)]}
            except ArtifactError as error:
                return {"id": request_id, "error": ["artifact", str(error)]}
            self._cache[sha256] = runnable
            if len(self._cache) > self._config.cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(sha256)
        try:
            result = self._runner.run(runnable, envelope)
        except Exception as error:  # a host bug: report its type, never data
            return {"id": request_id, "error": ["internal", type(error).__name__]}
        return {"id": request_id, "result": result.to_wire()}


def _read_frame(stream: BinaryIO) -> bytes | None:
    header = stream.read(_FRAME.size)
    if len(header) < _FRAME.size:
        return None
    (size,) = _FRAME.unpack(header)
    body = stream.read(size)
    return body if len(body) == size else None


def _send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(_FRAME.pack(len(payload)) + payload)


# --------------------------------------------------------------------------- parent side


class _Handle:
    """The parent's view of one worker process."""

    def __init__(
        self,
        process: multiprocessing.process.BaseProcess,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        cache_size: int,
    ) -> None:
        self.process = process
        self.reader = reader
        self.writer = writer
        self.alive = True
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.known: OrderedDict[str, None] = OrderedDict()
        self._cache_size = cache_size
        self._outbox: list[tuple[int, str, bytes | None, bytes]] = []
        self._flush_scheduled = False
        self.read_task: asyncio.Task[None] | None = None

    def submit(
        self, request_id: int, sha256: str, sealed: bytes | None, envelope: bytes
    ) -> asyncio.Future[dict[str, Any]]:
        if not self.alive:
            raise WorkerLost("the worker process is gone")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.pending[request_id] = future
        self._outbox.append((request_id, sha256, sealed, envelope))
        # Mirror the worker's LRU: it touches `sha256` when it serves this request.
        if sealed is not None or sha256 in self.known:
            self.known[sha256] = None
            self.known.move_to_end(sha256)
            while len(self.known) > self._cache_size:
                self.known.popitem(last=False)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        self._flush_scheduled = False
        batch, self._outbox = self._outbox, []
        if not batch or not self.alive:
            return
        payload = pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
        # One write, one send: each write is a system call that wakes the worker.
        self.writer.write(_FRAME.pack(len(payload)) + payload)

    async def read_replies(self, on_exit: Callable[[_Handle], None]) -> None:
        try:
            while True:
                frame = await _read_async_frame(self.reader)
                if frame is None:
                    break
                for reply in json.loads(frame):
                    future = self.pending.pop(reply["id"], None)
                    if future is not None and not future.done():
                        future.set_result(reply)
        except (ConnectionError, ValueError, KeyError, TypeError):
            pass  # a broken or garbled stream: treat the worker as lost
        finally:
            self.alive = False
            self.fail_pending(WorkerLost("the worker process exited while running the request"))
            on_exit(self)

    def fail_pending(self, error: Exception) -> None:
        pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)


async def _read_async_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        header = await reader.readexactly(_FRAME.size)
        (size,) = _FRAME.unpack(header)
        if size > _MAX_FRAME:
            raise ValueError("oversized frame")
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        return None


class Pool:
    """Worker processes running guests; `run` is safe to call concurrently from asyncio.

    Use `async with Pool(key) as pool:` or `await pool.start()` / `await pool.close()`.
    A worker that dies fails its in-flight requests with `WorkerLost` and is
    replaced; requests are not retried (a guest that kills its worker would
    kill the next one too).
    """

    def __init__(
        self,
        key: bytes,
        *,
        workers: int | None = None,
        limits: Limits = DEFAULT_LIMITS,
        cache_size: int = 64,
        max_inflight_per_worker: int = 64,
    ) -> None:
        self._size = workers or _usable_cores()
        self._config = _WorkerConfig(limits, key, cache_size)
        self._window = max_inflight_per_worker
        self._context = multiprocessing.get_context("spawn")
        self._handles: list[_Handle] = []
        self._ids = itertools.count(1)
        self._capacity: asyncio.Semaphore | None = None
        self._respawns: set[asyncio.Task[None]] = set()
        self._started = False
        self._closed = False

    @property
    def size(self) -> int:
        return self._size

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (for monitoring and tests)."""
        return [h.process.pid for h in self._handles if h.alive and h.process.pid is not None]

    async def start(self) -> Pool:
        if self._started:
            return self
        self._started = True
        self._capacity = asyncio.Semaphore(self._size * self._window)
        self._handles = list(await asyncio.gather(*(self._spawn() for _ in range(self._size))))
        return self

    async def __aenter__(self) -> Pool:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _spawn(self) -> _Handle:
        parent_end, child_end = socket.socketpair()
        process = self._context.Process(
            target=_worker_main, args=(child_end, self._config), name="wasm-worker", daemon=True
        )
        try:
            await asyncio.to_thread(process.start)
        finally:
            child_end.close()
        reader, writer = await asyncio.open_unix_connection(sock=parent_end)
        handle = _Handle(process, reader, writer, self._config.cache_size)
        try:
            ready = await asyncio.wait_for(_read_async_frame(reader), _START_TIMEOUT_S)
        except TimeoutError:
            ready = None
        if ready is None:
            writer.close()
            process.kill()
            raise SandboxError("a sandbox worker failed to start")
        handle.read_task = asyncio.create_task(handle.read_replies(self._on_exit))
        return handle

    def _on_exit(self, handle: _Handle) -> None:
        if self._closed:
            return
        task = asyncio.create_task(self._replace(handle))
        self._respawns.add(task)
        task.add_done_callback(self._respawns.discard)

    async def _replace(self, handle: _Handle) -> None:
        handle.writer.close()
        await asyncio.to_thread(handle.process.join, 5.0)
        if handle.process.is_alive():
            handle.process.kill()
        log.warning(
            "sandbox worker %s exited (code %s); starting a replacement",
            handle.process.pid,
            handle.process.exitcode,
        )
        if self._closed:
            return
        try:
            replacement = await self._spawn()
        except SandboxError:
            log.exception("could not replace a sandbox worker")
            return
        if self._closed:
            await self._stop(replacement)
            return
        self._handles[self._handles.index(handle)] = replacement

    async def _choose(self, sha256: str) -> _Handle:
        """The least busy live worker; waits for a replacement if none is alive."""
        handle = self._pick(sha256)
        if handle is None and self._respawns:
            await asyncio.wait(set(self._respawns), timeout=_START_TIMEOUT_S)
            handle = self._pick(sha256)
        if handle is None:
            raise WorkerLost("no sandbox worker is available")
        return handle

    def _pick(self, sha256: str) -> _Handle | None:
        best: _Handle | None = None
        for handle in self._handles:
            if not handle.alive:
                continue
            if (
                best is None
                or len(handle.pending) < len(best.pending)
                or (len(handle.pending) == len(best.pending) and sha256 in handle.known)
            ):
                best = handle
        return best

    async def run(
        self, sha256: str, artifact: bytes | ArtifactLoader, envelope: bytes
    ) -> RunResult:
        """Run the module `sha256` on `envelope` (serialized JSON) in a worker.

        `artifact` is the sealed artifact, or an async loader for it that is
        awaited only if the chosen worker does not hold the module yet.
        Raises `SealError`/`ArtifactError` for a bad artifact, `WorkerLost`
        or `PoolClosed`; guest failures are results, not exceptions.
        """
        if not self._started or self._closed or self._capacity is None:
            raise PoolClosed("the sandbox pool is not running")
        async with self._capacity:
            handle = await self._choose(sha256)
            sealed = None if sha256 in handle.known else await _load(artifact)
            reply = await handle.submit(next(self._ids), sha256, sealed, envelope)
            if reply.get("missing"):
                sealed = sealed or await _load(artifact)
                reply = await handle.submit(next(self._ids), sha256, sealed, envelope)
        if "result" in reply:
            return RunResult.from_wire(reply["result"])
        handle.known.pop(sha256, None)
        kind, message = reply.get("error") or ("internal", "malformed reply")
        if kind == "seal":
            raise SealError(str(message))
        if kind == "artifact":
            raise ArtifactError(str(message))
        raise SandboxError(f"sandbox worker failed: {message}")

    async def close(self, grace_s: float = 5.0) -> None:
        """Let in-flight runs finish (up to `grace_s`), then stop every worker."""
        if self._closed:
            return
        self._closed = True
        pending = [f for h in self._handles for f in h.pending.values()]
        if pending:
            await asyncio.wait(pending, timeout=grace_s)
        for task in list(self._respawns):
            task.cancel()
        await asyncio.gather(*(self._stop(h) for h in self._handles), return_exceptions=True)

    async def _stop(self, handle: _Handle) -> None:
        handle.fail_pending(PoolClosed("the sandbox pool was closed"))
        handle.alive = False
        handle.writer.close()  # EOF: the worker leaves its loop and exits
        await asyncio.to_thread(handle.process.join, 5.0)
        if handle.process.is_alive():
            handle.process.kill()
            await asyncio.to_thread(handle.process.join)
        if handle.read_task is not None:
            handle.read_task.cancel()
            await asyncio.gather(handle.read_task, return_exceptions=True)


def _usable_cores() -> int:
    """Cores this process may run on (respects affinity and cpusets, unlike cpu_count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


async def _load(artifact: bytes | ArtifactLoader) -> bytes:
    if isinstance(artifact, bytes):
        return artifact
    return await artifact()
