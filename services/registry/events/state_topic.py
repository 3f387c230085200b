"""Publishing workflow state on the compacted topic (record format: workflow_state.proto)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from eventflow.registry.v1 import workflow_state_pb2

from libs.bus import Bus
from libs.bus import topics as bus_topics
from libs.bus.base import Headers, inject_trace_context
from services.registry.storage.outbox import OutboxStore

log = logging.getLogger(__name__)

CONTENT_HEADERS: Headers = (
    ("content-type", b"application/x-protobuf"),
    ("ce_type", b"eventflow.registry.v1.WorkflowState"),
)


def state_record(state: workflow_state_pb2.WorkflowState) -> tuple[str, bytes, bytes, Headers]:
    """(topic, key, value, headers) for one state change, trace context included."""
    return (
        bus_topics.REGISTRY_WORKFLOWS,
        state.workflow_id.encode(),
        state.SerializeToString(deterministic=True),
        inject_trace_context(CONTENT_HEADERS),
    )


class OutboxRelay:
    """Moves committed outbox records to the bus.

    Woken right after a commit (``notify``) and otherwise polls, so records
    left behind by a crash are still sent.
    """

    def __init__(self, outbox: OutboxStore, bus: Bus, poll_interval_s: float = 0.5) -> None:
        self._outbox = outbox
        self._bus = bus
        self._poll = poll_interval_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def notify(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="registry-outbox-relay")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def drain(self) -> int:
        """Send everything pending now; returns how many records were sent."""
        sent = 0
        while True:
            async with self._outbox.claim(limit=100) as (records, _conn):
                for record in records:
                    await self._bus.publish(
                        record.topic, record.value, key=record.key, headers=record.headers
                    )
            if not records:
                return sent
            sent += len(records)

    async def _run(self) -> None:
        while True:
            try:
                await self.drain()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("outbox relay failed; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._poll)
            self._wake.clear()
