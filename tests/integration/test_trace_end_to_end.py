"""One trace from a producer to the vault (SPEC §11), through Kafka or gRPC.

A producer's `traceparent` (a Kafka header, or gRPC metadata on Publish) is
the parent of the ingest span; the step a worker runs later descends from
it through the database; the orchestrator's call to the executor and the
executor's call to the vault continue it in gRPC metadata. The same run
records the metrics an operator watches, and neither its spans nor its JSON
logs hold the secret the action read.
"""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from aiokafka import AIOKafkaProducer
from eventflow.orchestrator.v1 import event_pb2
from eventflow.orchestrator.v1 import event_service_pb2 as ev
from eventflow.registry.v1 import workflow_pb2 as wf
from eventflow.vault.v1 import secret_service_pb2 as vault_api
from eventflow.vault.v1 import secret_service_pb2_grpc as vault_grpc
from opentelemetry import metrics, propagate, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from libs.bus import topics as bus_topics
from libs.logs import JsonFormatter
from tests.conftest import Tenant, make_tenant
from tests.governance.conftest import ActionsClient
from tests.governance.modules import constant, wasm
from tests.orchestrator.conftest import Orchestrated, create_and_publish, eventually, structured

EXECUTE = "/eventflow.executor.v1.ExecutorService/Execute"
RESOLVE = "/eventflow.vault.v1.SecretResolverService/Resolve"
PUBLISH = "/eventflow.orchestrator.v1.EventService/Publish"

producer_tracer = trace.get_tracer("tests.producer")


@pytest.fixture(scope="session")
def metric_reader() -> InMemoryMetricReader:
    """Every measurement the in-test services make (the global meter provider)."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics.set_meter_provider(provider)
    assert metrics.get_meter_provider() is provider, "a meter provider was installed earlier"
    return reader


@dataclass
class SecretReader:
    """A published workflow whose one step runs an approved action that reads a secret."""

    tenant: Tenant
    trigger: str
    canary: str
    orchestrated: Orchestrated
    kafka: AIOKafkaProducer

    async def send(self, headers: list[tuple[str, bytes]], trigger: str = "") -> str:
        value = structured(self.tenant, trigger or self.trigger, {"orderId": "o-1"})
        await self.kafka.send_and_wait(
            bus_topics.EVENTS,
            value=value,
            headers=[("content-type", b"application/cloudevents+json"), *headers],
        )
        return str(json.loads(value)["id"])

    async def completed(self, event_id: str) -> Any:
        [reaction] = await self.orchestrated.settled(event_id)
        assert reaction.instance_status == "completed", reaction
        return reaction

    async def live(self, trigger: str = "") -> None:
        """Workflows and approvals reach the orchestrator and the executor over
        Kafka: probe with untraced events until one completes."""

        async def runs() -> bool:
            probe = await self.send([], trigger)
            try:
                reactions = await self.orchestrated.settled(probe, timeout_s=10)
            except AssertionError:
                return False  # the workflow is not live yet
            return reactions[0].instance_status == "completed"

        await eventually(runs, f"a workflow for {trigger or self.trigger} to run", timeout_s=60)


@pytest.fixture(scope="module")
async def secret_reader(
    channel: grpc.aio.Channel,
    operator_token: str,
    kafka_bootstrap: str,
    metric_reader: InMemoryMetricReader,
) -> AsyncIterator[SecretReader]:
    tenant = await make_tenant(channel, operator_token)
    actions = ActionsClient(tenant)
    name = f"reads-token-{uuid.uuid4().hex[:6]}"
    await actions.upload(name, wasm(constant({"scored": True})), permissions="read_secret:TOKEN")
    await actions.review(name, 1)
    canary = f"sk_live_CANARY_{uuid.uuid4().hex}"
    await vault_grpc.SecretServiceStub(channel).SetSecret(
        vault_api.SetSecretRequest(action=name, key="TOKEN", value=canary),
        metadata=tenant.metadata("developer"),
    )
    trigger = f"orders.created.{uuid.uuid4().hex[:6]}"
    await create_and_publish(tenant, trigger, [wf.Step(type="custom_action", action=name)])
    kafka = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await kafka.start()
    reader = SecretReader(tenant, trigger, canary, Orchestrated(tenant), kafka)
    try:
        await reader.live()
        yield reader
    finally:
        await kafka.stop()


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    """Everything logged meanwhile (DEBUG and up), as the JSON lines `serve` writes."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter("eventflow-test"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def carrier() -> dict[str, str]:
    found: dict[str, str] = {}
    propagate.inject(found)
    return found


async def trace_of(spans: InMemorySpanExporter, trace_id: int, *names: str) -> list[ReadableSpan]:
    """The finished spans of one trace, once it holds ``names`` (a name given
    twice: two spans of that name).

    A client span ends in a callback and the step span just after the
    outcome's commit, so they may finish a moment after the instance does.
    """
    found: list[ReadableSpan] = []

    async def complete() -> bool:
        nonlocal found
        found = [s for s in spans.get_finished_spans() if s.context.trace_id == trace_id]
        return Counter(names) <= Counter(s.name for s in found)

    await eventually(complete, f"spans {sorted(names)}")
    return found


def only(found: list[ReadableSpan], name: str, kind: SpanKind) -> ReadableSpan:
    matching = [s for s in found if s.name == name and s.kind == kind]
    assert len(matching) == 1, [(s.name, s.kind) for s in found]
    return matching[0]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def assert_step_reaches_the_vault(found: list[ReadableSpan], ingest: ReadableSpan) -> None:
    step = only(found, "eventflow.step", SpanKind.INTERNAL)
    execute_call = only(found, EXECUTE, SpanKind.CLIENT)
    execute = only(found, EXECUTE, SpanKind.SERVER)
    resolve_call = only(found, RESOLVE, SpanKind.CLIENT)
    resolve = only(found, RESOLVE, SpanKind.SERVER)
    assert parent_of(step) == ingest.context.span_id
    assert parent_of(execute_call) == step.context.span_id
    assert parent_of(execute) == execute_call.context.span_id
    assert parent_of(resolve_call) == execute.context.span_id
    assert parent_of(resolve) == resolve_call.context.span_id
    attributes = step.attributes or {}
    assert attributes["eventflow.step.type"] == "custom_action"
    assert attributes["eventflow.step.outcome"] == "completed"


def assert_no_leak(canary: str, spans: InMemorySpanExporter, logs: io.StringIO) -> None:
    for span in spans.get_finished_spans():
        assert canary not in span.to_json(), span.name
    lines = logs.getvalue().splitlines()
    assert lines, "nothing was logged at DEBUG"
    for line in lines:
        assert canary not in line
        assert {"time", "level", "logger", "message"} <= set(json.loads(line))


async def test_a_kafka_producers_trace_reaches_the_executor_and_the_vault(
    secret_reader: SecretReader, spans: InMemorySpanExporter, json_logs: io.StringIO
) -> None:
    with producer_tracer.start_as_current_span("send order", kind=SpanKind.PRODUCER) as sent:
        headers = [(k, v.encode()) for k, v in carrier().items()]
        event_id = await secret_reader.send(headers)
    await secret_reader.completed(event_id)

    found = await trace_of(
        spans, sent.get_span_context().trace_id, "eventflow.ingest", "eventflow.step", RESOLVE
    )
    ingest = only(found, "eventflow.ingest", SpanKind.CONSUMER)
    assert parent_of(ingest) == sent.get_span_context().span_id
    assert (ingest.attributes or {})["cloudevents.event_id"] == event_id
    assert (ingest.attributes or {})["eventflow.ingest.outcome"] == "stored"
    assert_step_reaches_the_vault(found, ingest)
    assert_no_leak(secret_reader.canary, spans, json_logs)


async def test_a_grpc_publishers_trace_reaches_the_executor_and_the_vault(
    secret_reader: SecretReader, spans: InMemorySpanExporter, json_logs: io.StringIO
) -> None:
    tenant = secret_reader.tenant
    with producer_tracer.start_as_current_span("publish order", kind=SpanKind.CLIENT) as sent:
        traceparent = tuple(carrier().items())
    published = await secret_reader.orchestrated.events.Publish(
        ev.PublishRequest(
            event=event_pb2.EventInput(
                type=secret_reader.trigger,
                project_id=tenant.project,
                data_json='{"orderId": "o-2"}',
            )
        ),
        metadata=tenant.metadata("developer") + traceparent,
    )
    await secret_reader.completed(published.event_id)

    found = await trace_of(
        spans, sent.get_span_context().trace_id, PUBLISH, "eventflow.step", RESOLVE
    )
    publish = only(found, PUBLISH, SpanKind.SERVER)
    ingest = only(found, "eventflow.ingest", SpanKind.CONSUMER)
    assert parent_of(publish) == sent.get_span_context().span_id
    assert parent_of(ingest) == publish.context.span_id
    assert_step_reaches_the_vault(found, ingest)
    assert_no_leak(secret_reader.canary, spans, json_logs)


def reading(reader: InMemoryMetricReader, name: str, **attributes: str) -> tuple[float, int]:
    """(total, measurements) of one instrument over the series matching ``attributes``:
    a counter's total, or a histogram's sum and count."""
    total, count = 0.0, 0
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in (m for m in scope.metrics if m.name == name):
                for point in metric.data.data_points:
                    if any((point.attributes or {}).get(k) != v for k, v in attributes.items()):
                        continue
                    if isinstance(point, HistogramDataPoint):
                        total, count = total + point.sum, count + point.count
                    elif isinstance(point, NumberDataPoint):
                        total, count = total + point.value, count + 1
    return total, count


async def approved(tenant: Tenant, document: dict[str, Any]) -> str:
    actions = ActionsClient(tenant)
    name = f"fx-{uuid.uuid4().hex[:6]}"
    await actions.upload(name, wasm(constant(document)))
    await actions.review(name, 1)
    return name


async def test_a_derived_event_continues_the_trace_of_the_step_that_derived_it(
    secret_reader: SecretReader, spans: InMemorySpanExporter
) -> None:
    tenant = secret_reader.tenant
    emits, derived = (f"orders.{uuid.uuid4().hex[:6]}" for _ in range(2))
    emitter = await approved(tenant, {"derived_event": {"type": derived, "payload": {}}})
    await create_and_publish(tenant, emits, [wf.Step(type="custom_action", action=emitter)])
    listener = await approved(tenant, {"ok": True})
    await create_and_publish(tenant, derived, [wf.Step(type="custom_action", action=listener)])
    await secret_reader.live(derived)
    await secret_reader.live(emits)

    with producer_tracer.start_as_current_span("send order", kind=SpanKind.PRODUCER) as sent:
        event_id = await secret_reader.send([(k, v.encode()) for k, v in carrier().items()], emits)
    reaction = await secret_reader.completed(event_id)
    child_id = json.loads(reaction.steps[0].output_json)["derived_event_id"]
    await secret_reader.completed(child_id)

    found = await trace_of(
        spans, sent.get_span_context().trace_id, "eventflow.step", "eventflow.step"
    )
    ingests = {
        (s.attributes or {})["cloudevents.event_id"]: s
        for s in found
        if s.name == "eventflow.ingest"
    }
    steps = {
        (s.attributes or {})["cloudevents.event_id"]: s for s in found if s.name == "eventflow.step"
    }
    assert set(ingests) == set(steps) == {event_id, child_id}
    assert parent_of(ingests[event_id]) == sent.get_span_context().span_id
    assert parent_of(steps[event_id]) == ingests[event_id].context.span_id
    assert parent_of(ingests[child_id]) == steps[event_id].context.span_id
    assert parent_of(steps[child_id]) == ingests[child_id].context.span_id


async def test_a_replays_steps_start_a_new_trace_linked_to_the_ingest(
    secret_reader: SecretReader, spans: InMemorySpanExporter
) -> None:
    with producer_tracer.start_as_current_span("send order", kind=SpanKind.PRODUCER) as sent:
        event_id = await secret_reader.send([(k, v.encode()) for k, v in carrier().items()])
    await secret_reader.completed(event_id)
    trace_id = sent.get_span_context().trace_id
    found = await trace_of(spans, trace_id, "eventflow.ingest", "eventflow.step")
    ingest = only(found, "eventflow.ingest", SpanKind.CONSUMER)

    o = secret_reader.orchestrated
    replayed = await o.events.ReplayEvent(
        ev.ReplayEventRequest(event_id=event_id, project_id=secret_reader.tenant.project),
        metadata=o.md,
    )
    [instance_id] = replayed.instance_ids
    await o.settled(event_id, count=2)
    step: list[ReadableSpan] = []

    async def replay_step_finished() -> bool:
        step[:] = [
            s
            for s in spans.get_finished_spans()
            if s.name == "eventflow.step"
            and (s.attributes or {}).get("eventflow.instance_id") == instance_id
        ]
        return bool(step)

    await eventually(replay_step_finished, "the replay's step span")
    [replay] = step
    assert replay.context.trace_id != trace_id and replay.parent is None
    assert [link.context.span_id for link in replay.links] == [ingest.context.span_id]
    original = [s.name for s in await trace_of(spans, trace_id)]
    assert original.count("eventflow.step") == 1, "the replay's step is not in the original trace"


COUNTERS = ("ingested", "started", "completed")


async def test_a_run_records_ingest_outcome_step_latency_and_fuel(
    secret_reader: SecretReader, metric_reader: InMemoryMetricReader
) -> None:
    def now() -> dict[str, tuple[float, int]]:
        return {
            "ingested": reading(metric_reader, "eventflow.events.ingested"),
            "started": reading(metric_reader, "eventflow.instances.started"),
            "completed": reading(metric_reader, "eventflow.instances.finished", status="completed"),
            "latency": reading(
                metric_reader, "eventflow.step.duration", type="custom_action", outcome="completed"
            ),
            "fuel": reading(
                metric_reader, "eventflow.action.fuel_used", call="execute", outcome="ok"
            ),
        }

    before = now()
    await secret_reader.completed(await secret_reader.send([]))

    async def recorded() -> bool:
        after = now()
        return all(after[counter][0] >= before[counter][0] + 1 for counter in COUNTERS) and all(
            after[histogram][1] >= before[histogram][1] + 1
            and after[histogram][0] > before[histogram][0]
            for histogram in ("latency", "fuel")
        )

    # Counters are added right after the transactions they count commit.
    await eventually(recorded, "the run's measurements")
