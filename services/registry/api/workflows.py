"""WorkflowService: protobuf in, use case, protobuf out. No rules live here."""

from __future__ import annotations

import json
from typing import Any, TypeAlias

import grpc
from eventflow.registry.v1 import workflow_pb2
from eventflow.registry.v1 import workflow_service_pb2 as pb
from eventflow.registry.v1 import workflow_service_pb2_grpc as pb_grpc

from libs.auth import Role, current_principal, requires
from services.registry.api.convert import raw_definition, version_proto, workflow_proto
from services.registry.workflows import WorkflowCatalog, WorkflowView

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


def _workflow(view: WorkflowView) -> workflow_pb2.Workflow:
    return workflow_proto(view.row, view.published_hash)


class WorkflowServicer(pb_grpc.WorkflowServiceServicer):
    def __init__(self, catalog: WorkflowCatalog) -> None:
        self._catalog = catalog

    @requires(Role.DEVELOPER)
    async def CreateWorkflow(
        self, request: pb.CreateWorkflowRequest, context: Context
    ) -> pb.CreateWorkflowResponse:
        created = await self._catalog.create(
            current_principal(), request.project_id, raw_definition(request.workflow)
        )
        return pb.CreateWorkflowResponse(
            workflow=_workflow(created), webhook_signing_secret=created.signing_secret
        )

    @requires(Role.VIEWER)
    async def GetWorkflow(
        self, request: pb.GetWorkflowRequest, context: Context
    ) -> pb.GetWorkflowResponse:
        view = await self._catalog.get(current_principal(), request.id)
        return pb.GetWorkflowResponse(workflow=_workflow(view))

    @requires(Role.VIEWER)
    async def ListWorkflows(
        self, request: pb.ListWorkflowsRequest, context: Context
    ) -> pb.ListWorkflowsResponse:
        filters = {
            "environment": request.environment,
            "status": request.status,
            "trigger_event": request.trigger_event,
        }
        views, token = await self._catalog.list_workflows(
            current_principal(), request.project_id, filters, request.page_size, request.page_token
        )
        return pb.ListWorkflowsResponse(
            workflows=[_workflow(v) for v in views], next_page_token=token
        )

    @requires(Role.DEVELOPER)
    async def UpdateWorkflow(
        self, request: pb.UpdateWorkflowRequest, context: Context
    ) -> pb.UpdateWorkflowResponse:
        view = await self._catalog.update(
            current_principal(),
            request.workflow.id,
            raw_definition(request.workflow),
            list(request.update_mask.paths),
        )
        return pb.UpdateWorkflowResponse(workflow=_workflow(view))

    @requires(Role.DEVELOPER)
    async def DeleteWorkflow(
        self, request: pb.DeleteWorkflowRequest, context: Context
    ) -> pb.DeleteWorkflowResponse:
        await self._catalog.delete(current_principal(), request.id)
        return pb.DeleteWorkflowResponse()

    @requires(Role.DEVELOPER)
    async def PublishWorkflow(
        self, request: pb.PublishWorkflowRequest, context: Context
    ) -> pb.PublishWorkflowResponse:
        result = await self._catalog.publish(current_principal(), request.id, request.message)
        outcome = pb.PUBLISH_OUTCOME_PUBLISHED if result.published else pb.PUBLISH_OUTCOME_UNCHANGED
        return pb.PublishWorkflowResponse(
            outcome=outcome,
            version=version_proto(result.version),
            workflow=_workflow(result.workflow),
        )

    @requires(Role.VIEWER)
    async def PreviewPublish(
        self, request: pb.PreviewPublishRequest, context: Context
    ) -> pb.PreviewPublishResponse:
        preview = await self._catalog.preview(current_principal(), request.id)
        return pb.PreviewPublishResponse(
            unchanged=not preview.changes,
            base_version=preview.base_version,
            draft_hash=preview.draft_hash,
            changes=[
                pb.FieldChange(
                    path=c.path,
                    kind=c.kind,
                    before=_json(c.before) if c.kind != "added" else "",
                    after=_json(c.after) if c.kind != "removed" else "",
                )
                for c in preview.changes
            ],
        )

    @requires(Role.VIEWER)
    async def ListWorkflowVersions(
        self, request: pb.ListWorkflowVersionsRequest, context: Context
    ) -> pb.ListWorkflowVersionsResponse:
        rows, token = await self._catalog.versions(
            current_principal(), request.workflow_id, request.page_size, request.page_token
        )
        return pb.ListWorkflowVersionsResponse(
            versions=[version_proto(r) for r in rows], next_page_token=token
        )

    @requires(Role.VIEWER)
    async def GetWorkflowVersion(
        self, request: pb.GetWorkflowVersionRequest, context: Context
    ) -> pb.GetWorkflowVersionResponse:
        row = await self._catalog.version(current_principal(), request.workflow_id, request.version)
        return pb.GetWorkflowVersionResponse(version=version_proto(row))

    @requires(Role.DEVELOPER)
    async def EnableWorkflow(
        self, request: pb.EnableWorkflowRequest, context: Context
    ) -> pb.EnableWorkflowResponse:
        view = await self._catalog.enable(current_principal(), request.id)
        return pb.EnableWorkflowResponse(workflow=_workflow(view))

    @requires(Role.DEVELOPER)
    async def DisableWorkflow(
        self, request: pb.DisableWorkflowRequest, context: Context
    ) -> pb.DisableWorkflowResponse:
        view = await self._catalog.disable(current_principal(), request.id)
        return pb.DisableWorkflowResponse(workflow=_workflow(view))

    @requires(Role.DEVELOPER)
    async def ArchiveWorkflow(
        self, request: pb.ArchiveWorkflowRequest, context: Context
    ) -> pb.ArchiveWorkflowResponse:
        view = await self._catalog.archive(current_principal(), request.id)
        return pb.ArchiveWorkflowResponse(workflow=_workflow(view))

    @requires(Role.DEVELOPER)
    async def RotateWebhookSigningSecret(
        self, request: pb.RotateWebhookSigningSecretRequest, context: Context
    ) -> pb.RotateWebhookSigningSecretResponse:
        secret = await self._catalog.rotate_signing_secret(current_principal(), request.id)
        return pb.RotateWebhookSigningSecretResponse(webhook_signing_secret=secret)


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
