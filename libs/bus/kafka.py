"""The Kafka adapter (aiokafka).

The producer is idempotent with ``acks=all``, so a retried send is written
once. Consumers use groups with auto-commit off and commit only what a
handler has handled (every 100 ms, in the background); on failure they
rewind to the batch's first offset and try again, which is what makes
processing at-least-once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import CommitFailedError, KafkaError, TopicAlreadyExistsError

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

log = logging.getLogger(__name__)
MAX_RECORD_BYTES = 2 * 1024 * 1024
COMMIT_INTERVAL_S = 0.1


class KafkaBus(Bus):
    """``namespace`` prefixes every topic and consumer group (``<ns>.eventflow.events``),
    so several eventflow installations can share one Kafka cluster."""

    def __init__(
        self, bootstrap: str, *, client_id: str = "eventflow", namespace: str = ""
    ) -> None:
        self._bootstrap = bootstrap
        self._client_id = client_id
        self._prefix = f"{namespace}." if namespace else ""
        self._producer: AIOKafkaProducer | None = None
        self._subscriptions: list[Subscription] = []

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap,
            client_id=self._client_id,
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
            # An event may carry 1 MiB of data plus its envelope.
            max_request_size=MAX_RECORD_BYTES,
        )
        await self._producer.start()

    async def stop(self) -> None:
        for subscription in self._subscriptions:
            await subscription.stop()
        self._subscriptions.clear()
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    async def ensure_topic(
        self, name: str, *, compacted: bool = False, partitions: int = 1
    ) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self._bootstrap, client_id=self._client_id)
        await admin.start()
        try:
            configs = {"max.message.bytes": str(MAX_RECORD_BYTES)}
            if compacted:
                configs["cleanup.policy"] = "compact"
            await admin.create_topics(
                [
                    NewTopic(
                        self._prefix + name, partitions, replication_factor=1, topic_configs=configs
                    )
                ]
            )
        except TopicAlreadyExistsError:
            pass
        finally:
            await admin.close()

    async def publish(
        self, topic: str, value: bytes | None, *, key: bytes | None = None, headers: Headers = ()
    ) -> None:
        if self._producer is None:
            raise RuntimeError("KafkaBus.publish before start()")
        await self._producer.send_and_wait(
            self._prefix + topic, value=value, key=key, headers=list(inject_trace_context(headers))
        )

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
        consumer = AIOKafkaConsumer(
            *(self._prefix + t for t in topics),
            bootstrap_servers=self._bootstrap,
            client_id=self._client_id,
            group_id=self._prefix + group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            max_partition_fetch_bytes=MAX_RECORD_BYTES,
        )
        await consumer.start()
        offsets = _Offsets(consumer)
        try:
            while not stopping.is_set():
                try:
                    await self._poll_once(consumer, handler, group, max_batch, offsets)
                    await offsets.commit_due()
                except (CommitFailedError, KafkaError) as error:
                    # The group moved on without us (a long pause missed heartbeats):
                    # the uncommitted batches are redelivered to whoever owns the
                    # partition now, and handlers are idempotent. Rejoin and go on.
                    offsets.forget()
                    log.warning("consumer group %s: %s; rejoining", group, type(error).__name__)
                    await asyncio.sleep(RETRY_DELAY_S)
        finally:
            with contextlib.suppress(CommitFailedError, KafkaError):
                await offsets.commit_all()
            await consumer.stop()

    async def _poll_once(
        self,
        consumer: AIOKafkaConsumer,
        handler: Handler,
        group: str,
        max_batch: int,
        offsets: _Offsets,
    ) -> None:
        fetched = await consumer.getmany(timeout_ms=200, max_records=max_batch)
        if not fetched:
            return
        # Every partition's records in one handler call: one transaction per poll,
        # however many partitions this consumer owns.
        batch = [_to_record(m, len(self._prefix)) for ms in fetched.values() for m in ms]
        if await run_handler(handler, batch, group):
            offsets.handled({p: ms[-1].offset + 1 for p, ms in fetched.items()})
            return
        for partition, messages in fetched.items():
            await _rewind(consumer, partition, messages[0].offset)
        await asyncio.sleep(RETRY_DELAY_S)


class _Offsets:
    """Offsets of handled batches, committed every COMMIT_INTERVAL_S in the background.

    Not one commit per batch: each is a broker round trip and a write to the offsets
    log, and under a steady trickle a poll holds one record. Committing behind the
    handler keeps that off every record's path; one commit in flight at a time keeps
    them in order. What a crash leaves uncommitted (at most an interval's batches) is
    redelivered to handlers that are idempotent.
    """

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self._consumer = consumer
        self._pending: dict[TopicPartition, int] = {}
        self._in_flight: asyncio.Task[None] | None = None
        self._last = time.monotonic()

    def handled(self, offsets: dict[TopicPartition, int]) -> None:
        self._pending.update(offsets)

    async def commit_due(self) -> None:
        """Start a commit of what is pending if the interval has passed and none is under
        way; a failed earlier commit raises here."""
        if self._in_flight is not None:
            if not self._in_flight.done():
                return
            finished, self._in_flight = self._in_flight, None
            await finished
        if self._pending and time.monotonic() - self._last >= COMMIT_INTERVAL_S:
            pending, self._pending = self._pending, {}
            self._last = time.monotonic()
            self._in_flight = asyncio.create_task(self._consumer.commit(pending))

    async def commit_all(self) -> None:
        if self._in_flight is not None:
            finished, self._in_flight = self._in_flight, None
            await finished
        if self._pending:
            pending, self._pending = self._pending, {}
            await self._consumer.commit(pending)

    def forget(self) -> None:
        """The group rebalanced under us: what was pending is the new owner's to redo."""
        self._pending.clear()
        if self._in_flight is not None:
            # Its failure (the likely outcome) has been reported by the rebalance itself.
            self._in_flight.add_done_callback(_ignore_outcome)
            self._in_flight = None


def _ignore_outcome(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()


async def _rewind(consumer: AIOKafkaConsumer, partition: TopicPartition, offset: int) -> None:
    consumer.seek(partition, offset)


def _to_record(message: object, prefix_length: int = 0) -> Record:
    """A record as handlers see it: under the topic name without the namespace."""
    return Record(
        topic=message.topic[prefix_length:],  # type: ignore[attr-defined]
        value=message.value,  # type: ignore[attr-defined]
        key=message.key,  # type: ignore[attr-defined]
        headers=tuple(message.headers or ()),  # type: ignore[attr-defined]
        partition=message.partition,  # type: ignore[attr-defined]
        offset=message.offset,  # type: ignore[attr-defined]
    )
