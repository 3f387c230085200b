"""The bus interface shared by both adapters."""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from opentelemetry import context as otel_context
from opentelemetry import propagate

log = logging.getLogger(__name__)

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Record:
    topic: str
    value: bytes | None
    key: bytes | None = None
    headers: Headers = ()
    partition: int = 0
    offset: int = -1

    def header(self, name: str) -> bytes | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None


Handler = Callable[[Sequence[Record]], Awaitable[None]]


def inject_trace_context(headers: Headers) -> Headers:
    """Add the current W3C trace context (traceparent, tracestate) to headers."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    present = {k for k, _ in headers}
    return headers + tuple((k, v.encode()) for k, v in carrier.items() if k not in present)


def trace_context(record: Record) -> otel_context.Context:
    """The trace context a record was published under, to parent the consumer's span."""
    carrier = {k: v.decode("latin-1") for k, v in record.headers}
    return propagate.extract(carrier)


@dataclass
class Subscription:
    """A running consumer; ``stop()`` ends it after the current batch."""

    task: asyncio.Task[None]
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    async def stop(self) -> None:
        self.stopping.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), timeout=10)
        except TimeoutError:
            self.task.cancel()
        except asyncio.CancelledError:
            pass


class Bus(abc.ABC):
    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    async def stop(self) -> None: ...

    @abc.abstractmethod
    async def ensure_topic(
        self, name: str, *, compacted: bool = False, partitions: int = 1
    ) -> None:
        """Create the topic if it does not exist (idempotent)."""

    @abc.abstractmethod
    async def publish(
        self, topic: str, value: bytes | None, *, key: bytes | None = None, headers: Headers = ()
    ) -> None:
        """Publish and wait until the bus has durably accepted the record."""

    @abc.abstractmethod
    def subscribe(
        self,
        topics: Sequence[str],
        group: str,
        handler: Handler,
        *,
        max_batch: int = 500,
    ) -> Subscription:
        """Start consuming; new groups start from the earliest record."""


RETRY_DELAY_S = 1.0


async def run_handler(handler: Handler, batch: Sequence[Record], group: str) -> bool:
    """Run a handler on a batch; False (and a logged error) if it raised."""
    try:
        await handler(batch)
        return True
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception(
            "consumer group %s failed on a batch of %d; will redeliver", group, len(batch)
        )
        return False
