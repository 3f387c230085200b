"""Tracing: every gRPC call is a server span, and a publish's trace continues
into the state record the outbox relays to Kafka."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

from eventflow.registry.v1 import workflow_service_pb2 as api
from eventflow.registry.v1.workflow_state_pb2 import WorkflowState
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from libs.bus import KafkaBus, Record, trace_context
from libs.bus import topics as bus_topics
from tests.conftest import Tenant
from tests.integration.helpers import workflow

PUBLISH = "/eventflow.registry.v1.WorkflowService/PublishWorkflow"


def is_active(record: Record) -> bool:
    """The record the publish wrote (the create before it wrote a draft one)."""
    return WorkflowState.FromString(record.value or b"").status == "active"


async def test_grpc_calls_are_server_spans(tenant: Tenant, spans: InMemorySpanExporter) -> None:
    await tenant.workflows.ListWorkflows(
        api.ListWorkflowsRequest(project_id=tenant.project), metadata=tenant.metadata("viewer")
    )
    names = [(s.name, s.kind) for s in spans.get_finished_spans()]
    assert ("/eventflow.registry.v1.WorkflowService/ListWorkflows", SpanKind.SERVER) in names


async def test_a_state_record_carries_the_trace_of_the_publish_that_caused_it(
    tenant: Tenant, spans: InMemorySpanExporter, kafka_bootstrap: str
) -> None:
    dev = tenant.metadata("developer")
    created = await tenant.workflows.CreateWorkflow(
        api.CreateWorkflowRequest(project_id=tenant.project, workflow=workflow()), metadata=dev
    )
    wf_id = created.workflow.id
    await tenant.workflows.PublishWorkflow(api.PublishWorkflowRequest(id=wf_id), metadata=dev)

    bus = KafkaBus(kafka_bootstrap)
    found: list[Record] = []

    async def handle(batch: Sequence[Record]) -> None:
        found.extend(r for r in batch if r.key == wf_id.encode() and is_active(r))

    await bus.start()
    try:
        bus.subscribe([bus_topics.REGISTRY_WORKFLOWS], f"trace-{uuid.uuid4().hex[:6]}", handle)
        for _ in range(600):
            if found:
                break
            await asyncio.sleep(0.05)
    finally:
        await bus.stop()
    assert found, "no state record for the published workflow"
    carried = trace.get_current_span(trace_context(found[0])).get_span_context()
    publish_spans = [s for s in spans.get_finished_spans() if s.name == PUBLISH]
    assert carried.trace_id in {s.context.trace_id for s in publish_spans}
