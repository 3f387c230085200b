"""Ingest: records from `eventflow.events` become stored events and instances.

One transaction per polled batch: invalid records go to the quarantine (and
`eventflow.events.invalid`), valid ones are inserted idempotently, and each
new event starts an instance of every matching active workflow unless
re-entry blocks it. The bus commits the batch's offsets only after this
transaction commits, so a crash replays the batch and the unique keys make
the replay a no-op.

Each record is an ingest span under the trace context its producer put in
the record's headers; a stored event keeps that span's context, so the
steps the workers run later continue the producer's trace.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from psycopg_pool import AsyncConnectionPool

from libs.bus import Record, trace_context
from libs.bus import topics as bus_topics
from libs.db import transaction
from libs.outbox import enqueue
from libs.telemetry import w3c_context
from services.orchestrator.domain import reentry
from services.orchestrator.environments import SANDBOX_DISABLED, SANDBOX_PLANS
from services.orchestrator.events.cloudevents import IncomingEvent, Invalid, parse_record
from services.orchestrator.runner.worker import Handoff, Worker
from services.orchestrator.storage import SCHEMA, instances, read_models
from services.orchestrator.storage import events as event_store
from services.orchestrator.storage.events import EventRow, QuarantinedRecord
from services.orchestrator.storage.read_models import EventKey, RunnableWorkflow

log = logging.getLogger(__name__)
meter = metrics.get_meter("eventflow.orchestrator")
tracer = trace.get_tracer("eventflow.orchestrator")
INGESTED = meter.create_counter(
    "eventflow.events.ingested", unit="{event}", description="events stored (not redeliveries)"
)
QUARANTINED = meter.create_counter(
    "eventflow.events.quarantined",
    unit="{record}",
    description="records kept in quarantine, by reason",
)
STARTED = meter.create_counter(
    "eventflow.instances.started", unit="{instance}", description="instances started"
)


@dataclass(frozen=True)
class IngestReport:
    stored: int
    duplicates: int
    quarantined: int
    started: int


class Ingest:
    def __init__(self, pool: AsyncConnectionPool, worker: Worker | None = None) -> None:
        self._pool = pool
        # This process's worker: what it has room for is claimed in the ingest's own
        # transaction and run as soon as that commits; the rest it is woken to claim.
        self._worker = worker

    async def handle(self, batch: Sequence[Record]) -> None:
        await self.ingest(batch)

    async def ingest(self, batch: Sequence[Record]) -> IngestReport:
        # Ended once the batch's transaction is over, whichever way it went.
        spans = [_ingest_span(record) for record in batch]
        try:
            return await self._ingest(batch, spans)
        except Exception as error:
            for span in spans:
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            raise
        finally:
            for span in spans:
                span.end()

    async def _ingest(self, batch: Sequence[Record], spans: list[Span]) -> IngestReport:
        parsed = [(record, parse_record(record.value, record.headers)) for record in batch]
        handoff = self._worker.handoff() if self._worker is not None else Handoff.none()
        try:
            async with transaction(self._pool) as conn:
                found = await read_models.routes(
                    conn, {_key(p) for _, p in parsed if isinstance(p, IncomingEvent)}
                )
                valid: list[EventRow] = []
                valid_spans: list[Span] = []
                rejected: list[QuarantinedRecord] = []
                for (record, result), span in zip(parsed, spans, strict=True):
                    problem = (
                        result
                        if isinstance(result, Invalid)
                        else _tenant_problem(result, found.plans)
                    )
                    if problem is not None:
                        rejected.append(_quarantined(record, problem))
                        span.set_attributes(
                            {
                                "eventflow.ingest.outcome": "quarantined",
                                "eventflow.reason": problem.reason,
                            }
                        )
                    else:
                        assert isinstance(result, IncomingEvent)
                        valid.append(_row(result, span))
                        valid_spans.append(span)
                await event_store.quarantine(conn, rejected)
                for q in rejected:
                    await enqueue(conn, SCHEMA, *_invalid_record(q))
                fresh = await event_store.insert_new(conn, valid)
                started = await start_instances(conn, fresh, found.workflows, handoff)
        except BaseException:
            handoff.abort()
            raise
        handoff.start()
        stored = {event.id for event in fresh}
        for row, span in zip(valid, valid_spans, strict=True):
            span.set_attribute(
                "eventflow.ingest.outcome", "stored" if row.id in stored else "duplicate"
            )
        for q in rejected:
            QUARANTINED.add(1, {"reason": q.reason})
        INGESTED.add(len(fresh))
        STARTED.add(len(started))
        return IngestReport(len(fresh), len(valid) - len(fresh), len(rejected), len(started))


async def start_instances(
    conn: event_store.Conn,
    events: list[EventRow],
    workflows: dict[EventKey, list[RunnableWorkflow]],
    handoff: Handoff,
) -> list[instances.InstanceRow]:
    """Start the ``workflows`` matching each new event (re-entry permitting), those the
    handoff has room for claimed for its worker; returns the instances created."""
    plan: list[tuple[EventRow, RunnableWorkflow, str | None]] = []
    for event in events:
        key = (event.organization_id, event.project_id, event.environment, event.type)
        for workflow in workflows.get(key, []):
            plan.append((event, workflow, reentry.subject_of(event.data)))
    # Two events for one subject in flight at once (here or in another
    # process) must not both pass a `once` check: lock every (workflow,
    # subject) pair first, in one order, then check and insert.
    await instances.lock_subjects(
        conn,
        [
            instances.reentry_lock_key(w.workflow_id, subject)
            for e, w, subject in plan
            if subject is not None and _reentry_applies(e, w)
        ],
    )
    by_id = {event.id: event for event in events}
    started: list[instances.InstanceRow] = []
    now = datetime.now(UTC)
    # Without re-entry nothing depends on what the batch starts: insert those together.
    unchecked: list[instances.NewInstance] = []
    for event, workflow, subject in plan:
        spec = instances.NewInstance(
            event.organization_id,
            event.project_id,
            event.environment,
            workflow.workflow_id,
            workflow.version,
            workflow.definition,
            event.id,
            event.event_id,
            subject,
            skip_side_effects=event.replay_skip_side_effects,
            is_test=event.is_test,
            # Replays and test runs stay out of re-entry history (instances.history).
            run_key=_run_key(event),
        )
        if subject is None or not _reentry_applies(event, workflow):
            unchecked.append(spec)
            continue
        # Checked one by one: each decision must see the instances started before it.
        history = await instances.history(conn, workflow.workflow_id, subject)
        decision = reentry.decide(workflow.definition.get("reentry", {}), history, now)
        if not decision.allowed:
            log.info(
                "re-entry blocked %s for event %s: %s",
                workflow.workflow_id,
                event.event_id,
                decision.reason,
            )
            continue
        started += await _create(conn, [spec], by_id, handoff)
    return started + await _create(conn, unchecked, by_id, handoff)


async def _create(
    conn: event_store.Conn,
    specs: list[instances.NewInstance],
    events: dict[uuid.UUID, EventRow],
    handoff: Handoff,
) -> list[instances.InstanceRow]:
    created = await instances.create_many(conn, specs, await handoff.claim(specs))
    handoff.took(created, events)
    return created


def _reentry_applies(event: EventRow, workflow: RunnableWorkflow) -> bool:
    # Re-entry never blocks a replay (SPEC §8) or a test run, nor what they derive.
    return _run_key(event) == "" and _mode(workflow) != "always"


def _run_key(event: EventRow) -> str:
    if event.is_test:
        return "test"
    return "replay" if event.replay_skip_side_effects else ""


def _mode(workflow: RunnableWorkflow) -> str:
    return str(workflow.definition.get("reentry", {}).get("mode", "always"))


def _key(event: IncomingEvent) -> EventKey:
    return (event.organization_id, event.project_id, event.environment, event.type)


def _tenant_problem(event: IncomingEvent, plans: dict[tuple[str, str], str]) -> Invalid | None:
    plan = plans.get((event.organization_id, event.project_id))
    if plan is None:
        return Invalid("UNKNOWN_TENANT", f"no project {event.organization_id}/{event.project_id}")
    if event.environment == "sandbox" and plan not in SANDBOX_PLANS:
        return Invalid(SANDBOX_DISABLED, f"the {plan} plan has no sandbox environment")
    return None


def _ingest_span(record: Record) -> Span:
    return tracer.start_span(
        "eventflow.ingest",
        context=trace_context(record),
        kind=SpanKind.CONSUMER,
        attributes={
            "messaging.destination.name": record.topic,
            "messaging.destination.partition.id": str(record.partition),
            "messaging.kafka.offset": record.offset,
        },
    )


def _row(event: IncomingEvent, span: Span) -> EventRow:
    span.set_attributes(
        {
            "cloudevents.event_id": event.event_id,
            "cloudevents.event_type": event.type,
            "eventflow.organization_id": event.organization_id,
            "eventflow.project_id": event.project_id,
            "eventflow.environment": event.environment,
        }
    )
    traceparent, tracestate = w3c_context(span)
    return EventRow(
        id=uuid.uuid4(),
        organization_id=event.organization_id,
        project_id=event.project_id,
        environment=event.environment,
        event_id=event.event_id,
        type=event.type,
        source=event.source,
        subject=event.subject,
        data=event.data,
        time=event.time,
        replay_skip_side_effects=event.replay_skip_side_effects,
        causation_id=event.causation_id,
        correlation_id=event.correlation_id,
        depth=event.depth,
        is_test=event.test_run,
        traceparent=traceparent,
        tracestate=tracestate,
    )


def _quarantined(record: Record, problem: Invalid) -> QuarantinedRecord:
    return QuarantinedRecord(
        reason=problem.reason,
        detail=problem.detail,
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        key=record.key,
        value=record.value,
        # jsonb cannot hold U+0000; a hostile header must not stall the batch.
        headers=[
            [_storable(k), _storable(v.decode("utf-8", "replace"))] for k, v in record.headers
        ],
    )


def _storable(text: str) -> str:
    return text.replace("\x00", "\ufffd")


def _invalid_record(
    q: QuarantinedRecord,
) -> tuple[str, bytes | None, bytes, tuple[tuple[str, bytes], ...]]:
    """What `eventflow.events.invalid` carries: the original bytes and why they were refused."""
    headers = (
        ("eventflow-reason", q.reason.encode()),
        ("eventflow-detail", q.detail.encode()[:1000]),
        ("eventflow-source", json.dumps([q.topic, q.partition, q.offset]).encode()),
    )
    return bus_topics.EVENTS_INVALID, q.key, q.value or b"", headers
