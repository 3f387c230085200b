"""An in-memory bus for the embedded stack and unit tests.

Each topic is an append-only list; each consumer group keeps its own offset
per topic. Same delivery contract as Kafka: a batch whose handler raises is
delivered again, and the offset moves only after success.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Sequence

from libs.bus.base import (
    RETRY_DELAY_S,
    Bus,
    Handler,
    Headers,
    Record,
    Subscription,
    inject_trace_context,
    run_handler,
)


class InProcessBus(Bus):
    def __init__(self) -> None:
        self._logs: dict[str, list[Record]] = defaultdict(list)
        self._offsets: dict[tuple[str, str], int] = defaultdict(int)
        self._changed = asyncio.Condition()
        self._subscriptions: list[Subscription] = []

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        for subscription in self._subscriptions:
            await subscription.stop()
        self._subscriptions.clear()

    async def ensure_topic(
        self, name: str, *, compacted: bool = False, partitions: int = 1
    ) -> None:
        self._logs.setdefault(name, [])

    async def publish(
        self, topic: str, value: bytes | None, *, key: bytes | None = None, headers: Headers = ()
    ) -> None:
        log = self._logs[topic]
        log.append(
            Record(topic, value, key, inject_trace_context(headers), partition=0, offset=len(log))
        )
        async with self._changed:
            self._changed.notify_all()

    def records(self, topic: str) -> list[Record]:
        """Everything published to a topic (for tests and diagnostics)."""
        return list(self._logs[topic])

    def subscribe(
        self, topics: Sequence[str], group: str, handler: Handler, *, max_batch: int = 500
    ) -> Subscription:
        stopping = asyncio.Event()
        task = asyncio.create_task(self._consume(list(topics), group, handler, max_batch, stopping))
        subscription = Subscription(task, stopping)
        self._subscriptions.append(subscription)
        return subscription

    async def _consume(
        self,
        topics: list[str],
        group: str,
        handler: Handler,
        max_batch: int,
        stopping: asyncio.Event,
    ) -> None:
        while not stopping.is_set():
            delivered = False
            for topic in topics:
                start = self._offsets[(group, topic)]
                batch = self._logs[topic][start : start + max_batch]
                if not batch:
                    continue
                delivered = True
                if await run_handler(handler, batch, group):
                    self._offsets[(group, topic)] = start + len(batch)
                else:
                    await asyncio.sleep(RETRY_DELAY_S)
            if not delivered:
                await self._wait_for_records(stopping)

    async def _wait_for_records(self, stopping: asyncio.Event) -> None:
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=0.5)
