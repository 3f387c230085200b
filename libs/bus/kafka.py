"""The Kafka adapter (aiokafka).

The producer is idempotent with ``acks=all``, so a retried send is written
once. Consumers use groups with auto-commit off and commit after the
handler succeeds; on failure they rewind to the last committed offsets and
try again, which is what makes processing at-least-once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
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
        # A batch's offsets are committed while the next batch is fetched and handled:
        # the broker round trip stays off the path of every event. Commits still land in
        # order (each is awaited before the next is sent), and a crash before one lands
        # only redelivers a batch the handler has made idempotent.
        committing: asyncio.Task[None] | None = None
        try:
            while not stopping.is_set():
                try:
                    committing = await self._poll_once(
                        consumer, handler, group, max_batch, committing
                    )
                except (CommitFailedError, KafkaError) as error:
                    # The group moved on without us (a long pause missed heartbeats):
                    # the uncommitted batch is redelivered to whoever owns the
                    # partition now, and handlers are idempotent. Rejoin and go on.
                    committing = None
                    log.warning("consumer group %s: %s; rejoining", group, type(error).__name__)
                    await asyncio.sleep(RETRY_DELAY_S)
        finally:
            if committing is not None:
                with contextlib.suppress(CommitFailedError, KafkaError):
                    await committing
            await consumer.stop()

    async def _poll_once(
        self,
        consumer: AIOKafkaConsumer,
        handler: Handler,
        group: str,
        max_batch: int,
        committing: asyncio.Task[None] | None,
    ) -> asyncio.Task[None] | None:
        """Fetch and handle one batch; returns the commit of its offsets, under way."""
        fetched = await consumer.getmany(timeout_ms=200, max_records=max_batch)
        if not fetched:
            return committing
        # Every partition's records in one handler call and one commit: one
        # transaction per poll, however many partitions this consumer owns.
        batch = [_to_record(m, len(self._prefix)) for ms in fetched.values() for m in ms]
        handled = await run_handler(handler, batch, group)
        if committing is not None:
            await committing  # the previous batch's, so commits land in order
        if handled:
            offsets = {p: ms[-1].offset + 1 for p, ms in fetched.items()}
            return asyncio.create_task(consumer.commit(offsets))
        for partition, messages in fetched.items():
            await _rewind(consumer, partition, messages[0].offset)
        await asyncio.sleep(RETRY_DELAY_S)
        return None


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
