"""The in-process bus keeps the Kafka delivery contract: ordered batches, per-group
offsets committed only after the handler succeeds, headers and trace context carried."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from libs.bus import inprocess
from libs.bus.base import Record, trace_context
from libs.bus.inprocess import InProcessBus

TOPIC = "eventflow.test.orders"


@pytest.fixture(autouse=True)
def fast_redelivery(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inprocess, "RETRY_DELAY_S", 0.01)


@pytest.fixture
async def bus() -> AsyncIterator[InProcessBus]:
    bus = InProcessBus()
    await bus.start()
    await bus.ensure_topic(TOPIC)
    yield bus
    await bus.stop()


class Collector:
    """A handler that records every batch it is given."""

    def __init__(self) -> None:
        self.batches: list[list[Record]] = []

    async def __call__(self, batch: Sequence[Record]) -> None:
        self.batches.append(list(batch))

    @property
    def values(self) -> list[bytes | None]:
        return [r.value for b in self.batches for r in b]


async def eventually(condition: Callable[[], bool], seconds: float = 3.0) -> None:
    step = 0.005
    for _ in range(int(seconds / step)):
        if condition():
            return
        await asyncio.sleep(step)
    raise AssertionError(f"condition still false after {seconds} s")


async def publish_all(bus: InProcessBus, *values: bytes, topic: str = TOPIC) -> None:
    for value in values:
        await bus.publish(topic, value)


async def test_records_are_delivered_in_order_in_batches(bus: InProcessBus) -> None:
    await publish_all(bus, b"1", b"2", b"3", b"4", b"5")
    collector = Collector()
    subscription = bus.subscribe([TOPIC], "orders", collector, max_batch=2)
    await eventually(lambda: len(collector.values) == 5)
    await subscription.stop()
    assert [[r.value for r in b] for b in collector.batches] == [[b"1", b"2"], [b"3", b"4"], [b"5"]]
    assert [r.offset for b in collector.batches for r in b] == [0, 1, 2, 3, 4]
    assert {r.topic for b in collector.batches for r in b} == {TOPIC}


async def test_records_published_after_subscribing_are_delivered(bus: InProcessBus) -> None:
    collector = Collector()
    subscription = bus.subscribe([TOPIC], "orders", collector)
    await asyncio.sleep(0.01)
    await publish_all(bus, b"late-1", b"late-2")
    await eventually(lambda: len(collector.values) == 2)
    await subscription.stop()
    assert collector.values == [b"late-1", b"late-2"]


async def test_a_failed_batch_is_redelivered_unchanged_before_anything_later(
    bus: InProcessBus,
) -> None:
    await publish_all(bus, b"a", b"b", b"c")
    seen: list[list[bytes | None]] = []
    failures = 2

    async def flaky(batch: Sequence[Record]) -> None:
        nonlocal failures
        seen.append([r.value for r in batch])
        if failures:
            failures -= 1
            raise RuntimeError("downstream unavailable")

    subscription = bus.subscribe([TOPIC], "orders", flaky, max_batch=2)
    await eventually(lambda: len(seen) == 4)
    await subscription.stop()
    assert seen == [[b"a", b"b"], [b"a", b"b"], [b"a", b"b"], [b"c"]]


async def test_the_offset_does_not_advance_while_the_handler_fails(bus: InProcessBus) -> None:
    await publish_all(bus, b"a", b"b")
    attempts = 0

    async def broken(batch: Sequence[Record]) -> None:
        nonlocal attempts
        attempts += 1
        raise RuntimeError("always fails")

    failing = bus.subscribe([TOPIC], "orders", broken)
    await eventually(lambda: attempts >= 3)
    await failing.stop()

    collector = Collector()
    retry = bus.subscribe([TOPIC], "orders", collector)
    await eventually(lambda: len(collector.values) == 2)
    await retry.stop()
    assert collector.values == [b"a", b"b"]


async def test_each_consumer_group_sees_every_record(bus: InProcessBus) -> None:
    await publish_all(bus, b"1", b"2", b"3")
    orchestrator, executor = Collector(), Collector()
    subscriptions = [
        bus.subscribe([TOPIC], "orchestrator", orchestrator),
        bus.subscribe([TOPIC], "executor", executor, max_batch=1),
    ]
    await eventually(lambda: len(orchestrator.values) == 3 and len(executor.values) == 3)
    for subscription in subscriptions:
        await subscription.stop()
    assert orchestrator.values == executor.values == [b"1", b"2", b"3"]


async def test_a_new_group_starts_from_the_earliest_record(bus: InProcessBus) -> None:
    first = Collector()
    subscription = bus.subscribe([TOPIC], "early", first)
    await publish_all(bus, b"1", b"2")
    await eventually(lambda: len(first.values) == 2)
    await subscription.stop()

    late = Collector()
    subscription = bus.subscribe([TOPIC], "late-joiner", late)
    await eventually(lambda: len(late.values) == 2)
    await subscription.stop()
    assert late.values == [b"1", b"2"]


async def test_resubscribing_with_the_same_group_resumes_after_the_committed_offset(
    bus: InProcessBus,
) -> None:
    await publish_all(bus, b"1", b"2", b"3")
    before = Collector()
    subscription = bus.subscribe([TOPIC], "orders", before)
    await eventually(lambda: len(before.values) == 3)
    await subscription.stop()

    await publish_all(bus, b"4", b"5")
    after = Collector()
    subscription = bus.subscribe([TOPIC], "orders", after)
    await eventually(lambda: len(after.values) == 2)
    await asyncio.sleep(0.05)  # nothing older arrives late
    await subscription.stop()
    assert after.values == [b"4", b"5"]
    assert [r.offset for b in after.batches for r in b] == [3, 4]


async def test_one_subscription_can_read_several_topics(bus: InProcessBus) -> None:
    await publish_all(bus, b"order", topic="eventflow.test.a")
    await publish_all(bus, b"invoice", topic="eventflow.test.b")
    collector = Collector()
    subscription = bus.subscribe(["eventflow.test.a", "eventflow.test.b"], "g", collector)
    await eventually(lambda: len(collector.values) == 2)
    await subscription.stop()
    assert sorted(r.topic for b in collector.batches for r in b) == [
        "eventflow.test.a",
        "eventflow.test.b",
    ]


async def test_key_and_headers_are_preserved(bus: InProcessBus) -> None:
    headers = (("ce_type", b"order.created"), ("ce_id", b"evt-1"), ("x-binary", b"\x00\xff"))
    await bus.publish(TOPIC, b"{}", key=b"acme/checkout", headers=headers)
    [record] = bus.records(TOPIC)
    assert record.key == b"acme/checkout"
    assert record.value == b"{}"
    assert record.headers[: len(headers)] == headers
    assert record.header("ce_type") == b"order.created"
    assert record.header("x-binary") == b"\x00\xff"
    assert record.header("missing") is None


async def test_a_tombstone_value_is_kept(bus: InProcessBus) -> None:
    await bus.publish(TOPIC, None, key=b"workflow-1")
    assert bus.records(TOPIC)[0].value is None


async def test_no_traceparent_is_added_without_an_active_span(bus: InProcessBus) -> None:
    await bus.publish(TOPIC, b"x")
    assert bus.records(TOPIC)[0].header("traceparent") is None


async def test_the_active_span_travels_in_a_traceparent_header(bus: InProcessBus) -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("ingest") as span:
        await bus.publish(TOPIC, b"x", headers=(("ce_id", b"evt-1"),))
    publisher = span.get_span_context()

    [record] = bus.records(TOPIC)
    assert record.header("ce_id") == b"evt-1"
    traceparent = record.header("traceparent")
    assert traceparent is not None
    assert f"{publisher.trace_id:032x}".encode() in traceparent

    consumer_parent = trace.get_current_span(trace_context(record)).get_span_context()
    assert consumer_parent.trace_id == publisher.trace_id
    assert consumer_parent.span_id == publisher.span_id
    assert consumer_parent.is_remote


async def test_a_consumer_span_continues_the_publishers_trace(bus: InProcessBus) -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("publish") as publish_span:
        await bus.publish(TOPIC, b"x")
    [record] = bus.records(TOPIC)
    with tracer.start_as_current_span("consume", context=trace_context(record)) as consume_span:
        pass
    assert consume_span.get_span_context().trace_id == publish_span.get_span_context().trace_id


async def test_a_traceparent_the_caller_set_is_not_replaced(bus: InProcessBus) -> None:
    mine = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("other"):
        await bus.publish(TOPIC, b"x", headers=(("traceparent", mine),))
    [record] = bus.records(TOPIC)
    assert [v for k, v in record.headers if k == "traceparent"] == [mine]


async def test_stopping_the_bus_stops_its_subscriptions() -> None:
    bus = InProcessBus()
    subscription = bus.subscribe([TOPIC], "orders", Collector())
    await asyncio.sleep(0.01)
    await bus.stop()
    assert subscription.task.done()
