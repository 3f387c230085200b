"""Protobuf views of orchestrator rows."""

from __future__ import annotations

import json

from eventflow.orchestrator.v1 import event_pb2, instance_pb2, instance_service_pb2

from libs.timestamps import timestamp
from services.orchestrator.reads import ReactionView, output_json
from services.orchestrator.storage.dead_letters import DeadLetterRow
from services.orchestrator.storage.events import EventRow
from services.orchestrator.storage.holds import HoldRow
from services.orchestrator.storage.instances import InstanceRow, LogEntry


def event_proto(row: EventRow) -> event_pb2.Event:
    return event_pb2.Event(
        id=row.event_id,
        organization_id=row.organization_id,
        project_id=row.project_id,
        environment=row.environment,
        type=row.type,
        source=row.source,
        subject=row.subject or "",
        data_json=json.dumps(row.data, ensure_ascii=False),
        time=timestamp(row.time),
        receive_time=timestamp(row.receive_time),
        replay_skip_side_effects=row.replay_skip_side_effects,
        causation_id=row.causation_id or "",
        correlation_id=row.correlation_id or "",
        depth=row.depth,
        is_test=row.is_test,
    )


def instance_proto(row: InstanceRow) -> instance_pb2.Instance:
    return instance_pb2.Instance(
        id=str(row.id),
        organization_id=row.organization_id,
        project_id=row.project_id,
        environment=row.environment,
        workflow_id=str(row.workflow_id),
        workflow_version=row.workflow_version,
        event_id=row.event_id,
        subject=row.subject or "",
        status=row.status,
        current_step=row.next_step,
        attempt=row.attempt,
        is_test=row.is_test,
        create_time=timestamp(row.create_time),
        update_time=timestamp(row.update_time),
    )


def log_proto(entry: LogEntry) -> instance_pb2.InstanceLogEntry:
    return instance_pb2.InstanceLogEntry(
        position=entry.position,
        kind=entry.kind,
        step=entry.step if entry.step is not None else -1,
        attempt=entry.attempt or 0,
        detail_json=json.dumps(entry.detail, ensure_ascii=False),
        time=timestamp(entry.time),
    )


def reaction_proto(view: ReactionView) -> event_pb2.Reaction:
    return event_pb2.Reaction(
        workflow_id=str(view.instance.workflow_id),
        workflow_version=view.instance.workflow_version,
        instance_id=str(view.instance.id),
        instance_status=view.instance.status,
        is_test=view.instance.is_test,
        steps=[
            event_pb2.StepOutcome(
                index=s.index,
                name=s.name,
                type=s.type,
                status=s.status,
                attempts=s.attempts,
                error=s.error,
                output_json=output_json(s.output),
            )
            for s in view.steps
        ],
    )


def dead_letter_proto(row: DeadLetterRow) -> instance_pb2.DeadLetter:
    return instance_pb2.DeadLetter(
        id=str(row.id),
        organization_id=row.organization_id,
        project_id=row.project_id,
        environment=row.environment,
        event_id=row.event_id,
        instance_id=str(row.instance_id),
        workflow_id=str(row.workflow_id),
        workflow_version=row.workflow_version,
        step=row.step,
        step_name=row.step_name,
        attempts=row.attempts,
        reason=row.reason,
        error=row.error,
        status=row.status,
        redrive_instance_id=str(row.redrive_instance_id or ""),
        create_time=timestamp(row.create_time),
    )


def hold_proto(row: HoldRow) -> instance_service_pb2.Hold:
    return instance_service_pb2.Hold(
        organization_id=row.organization_id,
        project_id=row.project_id,
        subject=row.subject,
        scope=row.scope,
        create_time=timestamp(row.create_time),
    )
