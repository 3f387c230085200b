"""The Kafka bus adapter against a real broker: delivery, commits, redelivery, headers."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from opentelemetry.sdk.trace import TracerProvider

from libs.bus import KafkaBus, Record, trace_context


def topic_name() -> str:
    return f"test.{uuid.uuid4().hex[:10]}"


async def wait_for(predicate: Callable[[], bool], limit_s: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + limit_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


async def test_records_published_are_consumed_in_order_with_headers(kafka_bootstrap: str) -> None:
    bus = KafkaBus(kafka_bootstrap)
    await bus.start()
    topic = topic_name()
    await bus.ensure_topic(topic)
    seen: list[Record] = []

    async def handle(batch: Sequence[Record]) -> None:
        seen.extend(batch)

    try:
        for i in range(5):
            await bus.publish(
                topic, f"v{i}".encode(), key=b"k", headers=(("x-n", str(i).encode()),)
            )
        subscription = bus.subscribe([topic], f"g-{topic}", handle)
        await wait_for(lambda: len(seen) == 5)
        await subscription.stop()
    finally:
        await bus.stop()
    assert [r.value for r in seen] == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    assert [r.header("x-n") for r in seen] == [b"0", b"1", b"2", b"3", b"4"]
    assert all(r.key == b"k" for r in seen)


async def test_a_failed_batch_is_redelivered_and_commits_only_after_success(
    kafka_bootstrap: str,
) -> None:
    bus = KafkaBus(kafka_bootstrap)
    await bus.start()
    topic, group = topic_name(), f"g-{uuid.uuid4().hex[:6]}"
    await bus.ensure_topic(topic)
    attempts: list[list[bytes | None]] = []

    async def flaky(batch: Sequence[Record]) -> None:
        attempts.append([r.value for r in batch])
        if len(attempts) == 1:
            raise RuntimeError("database briefly unavailable")

    try:
        await bus.publish(topic, b"only")
        subscription = bus.subscribe([topic], group, flaky)
        await wait_for(lambda: len(attempts) >= 2)
        await subscription.stop()
        # A new consumer in the same group starts after the committed offset.
        later: list[Record] = []

        async def collect(batch: Sequence[Record]) -> None:
            later.extend(batch)

        await bus.publish(topic, b"next")
        resumed = bus.subscribe([topic], group, collect)
        await wait_for(lambda: len(later) >= 1)
        await asyncio.sleep(0.5)
        await resumed.stop()
    finally:
        await bus.stop()
    assert attempts[:2] == [[b"only"], [b"only"]]
    assert [r.value for r in later] == [b"next"]


async def test_offsets_committed_in_the_background_all_land_before_stop(
    kafka_bootstrap: str,
) -> None:
    """Handled offsets are committed behind the handler, every 100 ms; a consumer that
    stops right after its last batch still leaves every offset committed."""
    bus = KafkaBus(kafka_bootstrap)
    await bus.start()
    topic, group = topic_name(), f"g-{uuid.uuid4().hex[:6]}"
    await bus.ensure_topic(topic)
    first: list[bytes | None] = []

    async def handle(batch: Sequence[Record]) -> None:
        first.extend(r.value for r in batch)

    try:
        for i in range(40):
            await bus.publish(topic, f"r{i}".encode())
        subscription = bus.subscribe([topic], group, handle, max_batch=3)
        await wait_for(lambda: len(first) == 40)
        await subscription.stop()
        later: list[bytes | None] = []

        async def collect(batch: Sequence[Record]) -> None:
            later.extend(r.value for r in batch)

        await bus.publish(topic, b"after")
        resumed = bus.subscribe([topic], group, collect)
        await wait_for(lambda: len(later) >= 1)
        await asyncio.sleep(0.5)
        await resumed.stop()
    finally:
        await bus.stop()
    assert first == [f"r{i}".encode() for i in range(40)]
    assert later == [b"after"]


async def test_trace_context_travels_in_record_headers(kafka_bootstrap: str) -> None:
    tracer = TracerProvider().get_tracer("test")
    bus = KafkaBus(kafka_bootstrap)
    await bus.start()
    topic = topic_name()
    seen: list[Record] = []

    async def handle(batch: Sequence[Record]) -> None:
        seen.extend(batch)

    try:
        with tracer.start_as_current_span("produce") as span:
            await bus.publish(topic, b"traced")
            trace_id = span.get_span_context().trace_id
        subscription = bus.subscribe([topic], f"g-{topic}", handle)
        await wait_for(lambda: len(seen) == 1)
        await subscription.stop()
    finally:
        await bus.stop()
    assert seen[0].header("traceparent") is not None
    from opentelemetry import trace

    extracted = trace.get_current_span(trace_context(seen[0])).get_span_context()
    assert extracted.trace_id == trace_id


async def test_state_topics_are_created_compacted(kafka_bootstrap: str) -> None:
    bus = KafkaBus(kafka_bootstrap)
    await bus.start()
    topic = topic_name()
    try:
        await bus.ensure_topic(topic, compacted=True)
        await bus.ensure_topic(topic, compacted=True)  # idempotent
    finally:
        await bus.stop()
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        await admin.close()
    configs = {entry[0]: entry[1] for entry in described[0].resources[0][4]}
    assert configs["cleanup.policy"] == "compact"


async def test_namespaces_keep_installations_apart_on_one_cluster(kafka_bootstrap: str) -> None:
    first = KafkaBus(kafka_bootstrap, namespace=f"ns{uuid.uuid4().hex[:6]}")
    second = KafkaBus(kafka_bootstrap, namespace=f"ns{uuid.uuid4().hex[:6]}")
    topic = topic_name()
    seen: dict[str, list[Record]] = {"first": [], "second": []}

    def collector(name: str) -> Callable[[Sequence[Record]], Awaitable[None]]:
        async def handle(batch: Sequence[Record]) -> None:
            seen[name].extend(batch)

        return handle

    await first.start()
    await second.start()
    try:
        await first.ensure_topic(topic)
        await second.ensure_topic(topic)
        await first.publish(topic, b"for-first")
        await second.publish(topic, b"for-second")
        first.subscribe([topic], "group", collector("first"))
        second.subscribe([topic], "group", collector("second"))
        await wait_for(lambda: bool(seen["first"]) and bool(seen["second"]))
        await asyncio.sleep(0.5)
    finally:
        await first.stop()
        await second.stop()
    assert [r.value for r in seen["first"]] == [b"for-first"]
    assert [r.value for r in seen["second"]] == [b"for-second"]
    assert seen["first"][0].topic == topic  # handlers see names without the namespace


async def test_a_consumer_survives_being_evicted_from_its_group(kafka_bootstrap: str) -> None:
    """A handler that stalls the loop past the session timeout gets its member evicted.
    The batch's commit then fails (and the batch is delivered again) or lands once the
    member has rejoined and still owns the partition; either way the loop must go on,
    not die, and nothing may be lost."""
    bus = KafkaBus(kafka_bootstrap)
    await bus.start()
    topic, group = topic_name(), f"g-{uuid.uuid4().hex[:6]}"
    await bus.ensure_topic(topic)
    seen: list[bytes | None] = []

    async def handle(batch: Sequence[Record]) -> None:
        seen.extend(r.value for r in batch)
        if len(seen) == 1:
            time.sleep(12)  # noqa: ASYNC251 -- stall the loop past the 10 s session timeout

    try:
        subscription = bus.subscribe([topic], group, handle)
        await bus.publish(topic, b"stalls")
        await wait_for(lambda: len(seen) >= 1)
        await bus.publish(topic, b"after")
        await wait_for(lambda: b"after" in seen, limit_s=60)
        assert not subscription.task.done()
        await subscription.stop()
    finally:
        await bus.stop()
    assert seen.count(b"stalls") >= 1 and seen.index(b"stalls") < seen.index(b"after")
