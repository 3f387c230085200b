"""The Kafka adapter (aiokafka).

The producer is idempotent with ``acks=all``, so a retried send is written
once. Consumers use groups with auto-commit off and commit after the
handler succeeds; on failure they rewind to the last committed offsets and
try again, which is what makes processing at-least-once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

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


class KafkaBus(Bus):
    def __init__(self, bootstrap: str, *, client_id: str = "eventflow") -> None:
        self._bootstrap = bootstrap
        self._client_id = client_id
        self._producer: AIOKafkaProducer | None = None
        self._subscriptions: list[Subscription] = []

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap,
            client_id=self._client_id,
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
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
            configs = {"cleanup.policy": "compact"} if compacted else {}
            await admin.create_topics(
                [NewTopic(name, partitions, replication_factor=1, topic_configs=configs)]
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
            topic, value=value, key=key, headers=list(inject_trace_context(headers))
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
            *topics,
            bootstrap_servers=self._bootstrap,
            client_id=self._client_id,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        await consumer.start()
        try:
            while not stopping.is_set():
                fetched = await consumer.getmany(timeout_ms=200, max_records=max_batch)
                for partition, messages in fetched.items():
                    batch = [_to_record(m) for m in messages]
                    if await run_handler(handler, batch, group):
                        await consumer.commit({partition: messages[-1].offset + 1})
                    else:
                        await _rewind(consumer, partition, messages[0].offset)
                        await asyncio.sleep(RETRY_DELAY_S)
        finally:
            await consumer.stop()


async def _rewind(consumer: AIOKafkaConsumer, partition: TopicPartition, offset: int) -> None:
    consumer.seek(partition, offset)


def _to_record(message: object) -> Record:
    return Record(
        topic=message.topic,  # type: ignore[attr-defined]
        value=message.value,  # type: ignore[attr-defined]
        key=message.key,  # type: ignore[attr-defined]
        headers=tuple(message.headers or ()),  # type: ignore[attr-defined]
        partition=message.partition,  # type: ignore[attr-defined]
        offset=message.offset,  # type: ignore[attr-defined]
    )
