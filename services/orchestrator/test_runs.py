"""Test runs (SPEC §7): try a workflow, its draft or its published version, on a payload.

A dry run reports what would happen: the re-entry decision for the payload's
subject and what each step would do (``step_plan``). Its transaction is
read-only, so it writes nothing even by mistake, and it executes nothing.

A hot run runs the workflow for real in its environment. The test event is
stored directly, never through ingest, so no other workflow on the same
trigger starts; one instance of this workflow is created, marked as a test.
Re-entry is not applied to it, and its run key keeps it out of the subject's
re-entry history (``instances.history`` counts only run_key '').
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from libs.auth import Principal
from libs.auth.scope import organization_of
from libs.db import transaction
from libs.errors import failed_precondition, invalid_field, not_found
from services.orchestrator.domain import reentry
from services.orchestrator.environments import require_environment
from services.orchestrator.events.cloudevents import (
    IncomingEvent,
    Invalid,
    OutgoingEvent,
    encode_structured,
    parse_record,
)
from services.orchestrator.step_plan import PlannedStep, StepPlanner
from services.orchestrator.storage import events as event_store
from services.orchestrator.storage import instances, read_models
from services.orchestrator.storage.events import Conn, EventRow

TEST_SOURCE = "eventflow/test-run"
NO_SUBJECT = "payload names no subject; re-entry not enforced"


@dataclass(frozen=True)
class ReentryView:
    subject: str
    mode: str
    allowed: bool
    reason: str


@dataclass(frozen=True)
class DryRun:
    workflow_id: str
    workflow_version: int
    environment: str
    trigger_event: str
    reentry: ReentryView
    steps: list[PlannedStep]

    @property
    def would_run(self) -> bool:
        return self.reentry.allowed and all(step.runnable for step in self.steps)


@dataclass(frozen=True)
class HotRun:
    event_id: str
    instance_id: uuid.UUID


@dataclass(frozen=True)
class _Target:
    """The workflow and the definition a test run walks."""

    workflow_id: uuid.UUID
    organization_id: str
    project_id: str
    environment: str
    status: str
    version: int  # 0: the draft
    definition: dict[str, Any]


class TestRuns:
    __test__ = False  # a use case, not a pytest class

    def __init__(
        self, pool: AsyncConnectionPool, planner: StepPlanner, on_started: Callable[[], None]
    ) -> None:
        self._pool = pool
        self._planner = planner
        # Wakes this process's workers for the new instance.
        self._on_started = on_started

    async def dry_run(
        self, who: Principal, workflow_id: str, draft: bool, payload_json: str
    ) -> DryRun:
        async with transaction(self._pool) as conn:
            await conn.execute("SET TRANSACTION READ ONLY")
            target = await _target(conn, who, workflow_id, draft)
            payload = _payload(target, payload_json, "dry-run").data
            decision = await _reentry(conn, target, payload)
        # The executor and DNS are asked outside the transaction: no connection held.
        steps = await self._planner.plan(target.organization_id, target.definition)
        return DryRun(
            str(target.workflow_id),
            target.version,
            target.environment,
            str(target.definition["trigger_event"]),
            decision,
            steps,
        )

    async def hot_run(
        self, who: Principal, workflow_id: str, draft: bool, payload_json: str
    ) -> HotRun:
        async with transaction(self._pool) as conn:
            target = await _target(conn, who, workflow_id, draft)
            if target.status == "archived":
                raise failed_precondition(
                    "WORKFLOW_ARCHIVED", f"workflow {workflow_id} is archived"
                )
            event = _row(_payload(target, payload_json, f"test-{uuid.uuid4()}"))
            [stored] = await event_store.insert_new(conn, [event])
            created = await instances.create(
                conn,
                organization_id=target.organization_id,
                project_id=target.project_id,
                environment=target.environment,
                workflow_id=target.workflow_id,
                version=target.version,
                definition=target.definition,
                event=stored.id,
                event_id=stored.event_id,
                subject=reentry.subject_of(stored.data),
                skip_side_effects=False,
                is_test=True,
                run_key=f"test:{stored.event_id}",
            )
            assert created is not None, "a fresh event has no instance yet"
        self._on_started()
        return HotRun(stored.event_id, created)


async def _target(conn: Conn, who: Principal, workflow_id: str, draft: bool) -> _Target:
    try:
        ident = uuid.UUID(workflow_id)
    except ValueError:
        raise invalid_field("workflow_id", "must be a UUID") from None
    row = await read_models.workflow_of(conn, organization_of(who), ident)
    # Another project's workflow is reported exactly like a missing one.
    if row is None or (who.project_id and row.project_id != who.project_id):
        raise not_found("workflow", workflow_id)
    if draft:
        if row.draft_definition is None:
            raise failed_precondition(
                "NO_DRAFT", f"the orchestrator has not received workflow {workflow_id}'s draft yet"
            )
        definition, version = row.draft_definition, 0
        environment = str(definition.get("environment") or row.environment)
    else:
        if row.definition is None or row.version is None:
            raise failed_precondition(
                "WORKFLOW_NOT_PUBLISHED",
                f"workflow {workflow_id} has no published version; try its draft instead",
            )
        definition, version, environment = row.definition, row.version, row.environment
    await require_environment(conn, row.organization_id, row.project_id, environment)
    return _Target(
        row.workflow_id,
        row.organization_id,
        row.project_id,
        environment,
        row.status,
        version,
        definition,
    )


def _payload(target: _Target, payload_json: str, event_id: str) -> IncomingEvent:
    """The test event, checked by the very parser ingest uses, so both accept the same data."""
    event = OutgoingEvent(
        event_id=event_id,
        source=TEST_SOURCE,
        type=str(target.definition["trigger_event"]),
        organization_id=target.organization_id,
        project_id=target.project_id,
        data_json=(payload_json or "{}").encode("utf-8", "surrogatepass"),
        time=datetime.now(UTC),
        environment=target.environment,
    )
    _, value, headers = encode_structured(event)
    parsed = parse_record(value, headers)
    if isinstance(parsed, Invalid):
        raise invalid_field("payload_json", parsed.detail)
    return parsed


def _row(event: IncomingEvent) -> EventRow:
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
        replay_skip_side_effects=False,
        causation_id=None,
        correlation_id=None,
        depth=0,
        is_test=True,
    )


async def _reentry(conn: Conn, target: _Target, payload: dict[str, Any]) -> ReentryView:
    """The decision ingest would make for this payload's subject, right now."""
    rules = target.definition.get("reentry") or {}
    mode = str(rules.get("mode") or "always")
    subject = reentry.subject_of(payload)
    if subject is None:
        return ReentryView("", mode, True, NO_SUBJECT)
    if mode == "always":
        return ReentryView(subject, mode, True, "always: every event starts an instance")
    history = await instances.history(conn, target.workflow_id, subject)
    decision = reentry.decide(rules, history, datetime.now(UTC))
    if decision.allowed:
        return ReentryView(subject, mode, True, f"{mode}: nothing blocks this subject")
    return ReentryView(subject, mode, False, decision.reason)
