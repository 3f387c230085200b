"""Publishing over gRPC: validate, then write to `eventflow.events` like any producer.

Each event is encoded exactly as a Kafka producer would send it and parsed
back with the same parser ingest uses, so the two doors accept the same
events. Nothing is written unless every event of a batch is valid.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from eventflow.orchestrator.v1 import event_pb2
from psycopg_pool import AsyncConnectionPool

from libs.auth import Principal
from libs.auth.scope import organization_of, project_scope
from libs.bus import Bus
from libs.bus import topics as bus_topics
from libs.db import transaction
from libs.errors import FieldViolation, invalid_argument, not_found
from services.orchestrator.environments import SANDBOX_PLANS, sandbox_refusal
from services.orchestrator.events.cloudevents import (
    Invalid,
    OutgoingEvent,
    encode_structured,
    parse_record,
)
from services.orchestrator.storage import read_models

MAX_BATCH = 500
# Which request field an ingest refusal is about.
_FIELDS = {
    "BAD_TYPE": "type",
    "BAD_ENVIRONMENT": "environment",
    "BAD_JSON": "data_json",
    "NOT_AN_OBJECT": "data_json",
    "BAD_DATA": "data_json",
    "PAYLOAD_TOO_LARGE": "data_json",
    "BAD_TENANT": "project_id",
}


@dataclass(frozen=True)
class _Ready:
    event: OutgoingEvent
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]


class Publisher:
    def __init__(self, pool: AsyncConnectionPool, bus: Bus) -> None:
        self._pool = pool
        self._bus = bus

    async def publish(
        self, who: Principal, inputs: list[event_pb2.EventInput], batch: bool
    ) -> list[str]:
        if batch and not 1 <= len(inputs) <= MAX_BATCH:
            raise invalid_argument([FieldViolation("events", f"send 1 to {MAX_BATCH} events")])
        org = organization_of(who)
        ready, violations = [], []
        for i, given in enumerate(inputs):
            prefix = f"events[{i}]" if batch else "event"
            event = _outgoing(who, org, given)
            key, value, headers = encode_structured(event)
            check = parse_record(value, headers)
            if isinstance(check, Invalid):
                field = _FIELDS.get(check.reason, "")
                violations.append(
                    FieldViolation(f"{prefix}.{field}" if field else prefix, check.detail)
                )
            else:
                ready.append(_Ready(event, key, value, list(headers)))
        if violations:
            raise invalid_argument(violations)
        await self._check_tenants(ready)
        for item in ready:
            await self._bus.publish(
                bus_topics.EVENTS, item.value, key=item.key, headers=tuple(item.headers)
            )
        return [item.event.event_id for item in ready]

    async def _check_tenants(self, ready: list[_Ready]) -> None:
        wanted = {(r.event.organization_id, r.event.project_id) for r in ready}
        async with transaction(self._pool) as conn:
            plans = await read_models.plans_for(conn, wanted)
        for item in ready:
            plan = plans.get((item.event.organization_id, item.event.project_id))
            if plan is None:
                raise not_found("project", item.event.project_id)
            if item.event.environment == "sandbox" and plan not in SANDBOX_PLANS:
                raise sandbox_refusal(plan)


def _outgoing(who: Principal, org: str, given: event_pb2.EventInput) -> OutgoingEvent:
    project = project_scope(who, given.project_id)
    assert project is not None
    when = given.time.ToDatetime(tzinfo=UTC) if given.HasField("time") else datetime.now(UTC)
    return OutgoingEvent(
        event_id=given.id or str(uuid.uuid4()),
        source=given.source or "grpc",
        type=given.type,
        organization_id=org,
        project_id=project,
        data_json=(given.data_json or "{}").encode(),
        time=when,
        environment=given.environment or "production",
        subject=given.subject or None,
    )
