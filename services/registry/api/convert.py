"""Protobuf <-> the registry's JSON-shaped domain values.

Presence matters on the way in: an unset optional field means "use the
default", so only fields the client set are copied into the raw definition.
"""

from __future__ import annotations

from typing import Any

from eventflow.registry.v1 import tenancy_service_pb2 as tenancy_pb
from eventflow.registry.v1 import workflow_pb2 as pb
from google.protobuf import json_format

from libs.timestamps import timestamp
from services.registry.storage.tenancy import ApiKeyRow, OrganizationRow, ProjectRow
from services.registry.storage.workflows import VersionRow, WorkflowRow


def raw_definition(workflow: pb.Workflow) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": workflow.name,
        "trigger_event": workflow.trigger_event,
        "environment": workflow.environment,
        "steps": [raw_step(s) for s in workflow.steps],
    }
    if workflow.HasField("reentry"):
        raw["reentry"] = _set_fields(workflow.reentry)
    return raw


def raw_step(step: pb.Step) -> dict[str, Any]:
    raw = _set_fields(step)
    if step.HasField("retry"):
        raw["retry"] = _set_fields(step.retry)
    raw["headers"] = dict(step.headers)
    return raw


def _set_fields(message: Any) -> dict[str, Any]:
    """Scalar fields the sender set (proto3 `optional`, or non-default values)."""
    return {
        field.name: value for field, value in message.ListFields() if field.message_type is None
    }


def definition_proto(definition: dict[str, Any]) -> pb.WorkflowDefinition:
    return json_format.ParseDict(definition, pb.WorkflowDefinition())


def workflow_proto(row: WorkflowRow, published_hash: str | None) -> pb.Workflow:
    definition = definition_proto(row.draft)
    return pb.Workflow(
        id=str(row.id),
        organization_id=row.organization_id,
        project_id=row.project_id,
        name=definition.name,
        trigger_event=definition.trigger_event,
        environment=definition.environment,
        status=row.status,
        steps=definition.steps,
        reentry=definition.reentry,
        published_version=row.published_version,
        has_unpublished_changes=row.draft_hash != published_hash,
        create_time=timestamp(row.create_time),
        update_time=timestamp(row.update_time),
    )


def version_proto(row: VersionRow) -> pb.WorkflowVersion:
    return pb.WorkflowVersion(
        workflow_id=str(row.workflow_id),
        version=row.version,
        definition_hash=row.definition_hash,
        message=row.message,
        definition=definition_proto(row.definition),
        create_time=timestamp(row.create_time),
        created_by=row.created_by,
    )


def organization_proto(row: OrganizationRow) -> tenancy_pb.Organization:
    return tenancy_pb.Organization(
        id=row.id,
        display_name=row.display_name,
        plan=row.plan,
        create_time=timestamp(row.create_time),
    )


def project_proto(row: ProjectRow) -> tenancy_pb.Project:
    return tenancy_pb.Project(
        id=row.id,
        organization_id=row.organization_id,
        display_name=row.display_name,
        create_time=timestamp(row.create_time),
    )


def api_key_proto(row: ApiKeyRow) -> tenancy_pb.ApiKey:
    return tenancy_pb.ApiKey(
        id=row.id,
        organization_id=row.organization_id,
        project_id=row.project_id or "",
        role=row.role,
        description=row.description,
        create_time=timestamp(row.create_time),
        revoked=row.revoked,
    )
