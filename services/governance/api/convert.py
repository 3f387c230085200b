"""Protobuf views of governance rows."""

from __future__ import annotations

import json

from eventflow.executor.v1 import executor_service_pb2 as executor_pb
from eventflow.governance.v1 import action_pb2 as pb
from eventflow.governance.v1 import action_service_pb2 as service_pb

from libs.timestamps import timestamp
from services.governance.actions import ActionView
from services.governance.storage.actions import ReviewRow, VersionRow
from services.governance.storage.usages import UsageRow


def action_proto(view: ActionView) -> pb.Action:
    a = view.action
    return pb.Action(
        id=str(a.id),
        organization_id=a.organization_id,
        name=a.name,
        description=a.description,
        enabled=a.enabled,
        latest_version=view.latest_version,
        current_version=view.current_version,
        create_time=timestamp(a.create_time),
        update_time=timestamp(a.update_time),
    )


def version_proto(
    name: str, row: VersionRow, reviews: list[ReviewRow] | None = None
) -> pb.ActionVersion:
    return pb.ActionVersion(
        action_id=str(row.action_id),
        action_name=name,
        version=row.version,
        sha256=row.sha256,
        size_bytes=row.size_bytes,
        permissions=row.permissions,
        review_status=row.review_status,
        review_comment=row.review_comment,
        reviewed_by=row.reviewed_by,
        review_time=timestamp(row.review_time),
        uploaded_by=row.uploaded_by,
        signature_status=row.signature_status,
        key_fingerprint=row.key_fingerprint,
        create_time=timestamp(row.create_time),
        reviews=[
            pb.ReviewEvent(
                from_status=r.from_status,
                to_status=r.to_status,
                comment=r.comment,
                actor=r.actor,
                time=timestamp(r.create_time),
            )
            for r in reviews or []
        ],
    )


def usage_proto(row: UsageRow, refs: list[str]) -> pb.ActionUsage:
    return pb.ActionUsage(
        workflow_id=str(row.workflow_id),
        project_id=row.project_id,
        workflow_name=row.workflow_name,
        workflow_status=row.workflow_status,
        in_draft=bool(set(row.draft_refs) & set(refs)),
        in_published=bool(set(row.published_refs) & set(refs)),
    )


def simulation_proto(result: executor_pb.RunResult) -> service_pb.SimulationResult:
    projection = ""
    if result.HasField("projection"):
        p = result.projection
        projection = json.dumps(
            {
                "name": p.name,
                "entity_type": p.entity_type,
                "entity_id": p.entity_id,
                "title": p.title,
                "status": p.status,
                "data": json.loads(p.data_json or "null"),
            }
        )
    derived = ""
    if result.HasField("derived_event"):
        d = result.derived_event
        derived = json.dumps({"type": d.type, "payload": json.loads(d.payload_json or "{}")})
    return service_pb.SimulationResult(
        ok=result.ok,
        failure_reason=result.failure_reason,
        failure_message=result.failure_message,
        output_json=result.output_json,
        projection_json=projection,
        derived_event_json=derived,
        fuel_used=result.fuel_used,
        duration_us=result.duration_us,
        peak_memory_bytes=result.peak_memory_bytes,
    )
