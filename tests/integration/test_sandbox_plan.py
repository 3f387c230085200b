"""The registry's side of the sandbox plan gate (SPEC §2).

A downgrade to starter keeps sandbox workflows; every call on one, and every
listing that asks for the sandbox, is refused with SANDBOX_DISABLED until the
plan has a sandbox again. Production workflows are not affected.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from eventflow.registry.v1 import tenancy_service_pb2 as tn
from eventflow.registry.v1 import workflow_pb2 as wf
from eventflow.registry.v1 import workflow_service_pb2 as api
from google.protobuf.field_mask_pb2 import FieldMask

from tests.conftest import Tenant, bearer, make_tenant
from tests.integration.helpers import rpc_error, workflow


async def change_plan(tenant: Tenant, operator_token: str, plan: str) -> None:
    await tenant.tenancy.UpdateOrganizationPlan(
        tn.UpdateOrganizationPlanRequest(id=tenant.org, plan=plan), metadata=bearer(operator_token)
    )


def calls_on(tenant: Tenant, workflow_id: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    """Every WorkflowService call a tenant makes on one workflow, by name."""
    stub, md = tenant.workflows, tenant.metadata("developer")
    return {
        "GetWorkflow": lambda: stub.GetWorkflow(
            api.GetWorkflowRequest(id=workflow_id), metadata=md
        ),
        "UpdateWorkflow": lambda: stub.UpdateWorkflow(
            api.UpdateWorkflowRequest(
                workflow=wf.Workflow(id=workflow_id, name="renamed"),
                update_mask=FieldMask(paths=["name"]),
            ),
            metadata=md,
        ),
        "PublishWorkflow": lambda: stub.PublishWorkflow(
            api.PublishWorkflowRequest(id=workflow_id), metadata=md
        ),
        "PreviewPublish": lambda: stub.PreviewPublish(
            api.PreviewPublishRequest(id=workflow_id), metadata=md
        ),
        "ListWorkflowVersions": lambda: stub.ListWorkflowVersions(
            api.ListWorkflowVersionsRequest(workflow_id=workflow_id), metadata=md
        ),
        "GetWorkflowVersion": lambda: stub.GetWorkflowVersion(
            api.GetWorkflowVersionRequest(workflow_id=workflow_id, version=1), metadata=md
        ),
        "EnableWorkflow": lambda: stub.EnableWorkflow(
            api.EnableWorkflowRequest(id=workflow_id), metadata=md
        ),
        "DisableWorkflow": lambda: stub.DisableWorkflow(
            api.DisableWorkflowRequest(id=workflow_id), metadata=md
        ),
        "ArchiveWorkflow": lambda: stub.ArchiveWorkflow(
            api.ArchiveWorkflowRequest(id=workflow_id), metadata=md
        ),
        "RotateWebhookSigningSecret": lambda: stub.RotateWebhookSigningSecret(
            api.RotateWebhookSigningSecretRequest(id=workflow_id), metadata=md
        ),
        "DeleteWorkflow": lambda: stub.DeleteWorkflow(
            api.DeleteWorkflowRequest(id=workflow_id), metadata=md
        ),
    }


async def create(tenant: Tenant, environment: str, *, published: bool) -> wf.Workflow:
    md = tenant.metadata("developer")
    created = await tenant.workflows.CreateWorkflow(
        api.CreateWorkflowRequest(
            project_id=tenant.project, workflow=workflow(environment=environment)
        ),
        metadata=md,
    )
    if not published:
        return created.workflow
    done = await tenant.workflows.PublishWorkflow(
        api.PublishWorkflowRequest(id=created.workflow.id), metadata=md
    )
    return done.workflow


async def test_a_downgrade_to_starter_refuses_every_call_on_a_sandbox_workflow(
    tenant: Tenant, operator_token: str
) -> None:
    published = await create(tenant, "sandbox", published=True)
    draft = await create(tenant, "sandbox", published=False)
    production = await create(tenant, "production", published=True)
    await change_plan(tenant, operator_token, "starter")

    for workflow_id in (published.id, draft.id):
        for name, call in calls_on(tenant, workflow_id).items():
            error = await rpc_error(call())
            assert (error.code, error.reason) == (
                grpc.StatusCode.FAILED_PRECONDITION,
                "SANDBOX_DISABLED",
            ), name
    md = tenant.metadata("developer")
    error = await rpc_error(
        tenant.workflows.ListWorkflows(api.ListWorkflowsRequest(environment="sandbox"), metadata=md)
    )
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SANDBOX_DISABLED")
    # Production is untouched by the gate, and a plain listing still shows everything.
    production_calls = calls_on(tenant, production.id)
    for name in ("GetWorkflow", "PreviewPublish", "DisableWorkflow", "EnableWorkflow"):
        await production_calls[name]()
    listed = await tenant.workflows.ListWorkflows(api.ListWorkflowsRequest(), metadata=md)
    assert {w.id for w in listed.workflows} == {published.id, draft.id, production.id}

    # Nothing was changed by the refused calls; an upgrade brings the sandbox back.
    await change_plan(tenant, operator_token, "team")
    after = await tenant.workflows.GetWorkflow(api.GetWorkflowRequest(id=published.id), metadata=md)
    assert after.workflow == published
    await calls_on(tenant, draft.id)["DeleteWorkflow"]()
    sandbox_only = await tenant.workflows.ListWorkflows(
        api.ListWorkflowsRequest(environment="sandbox"), metadata=md
    )
    assert [w.id for w in sandbox_only.workflows] == [published.id]


async def test_listing_the_sandbox_is_refused_on_the_starter_plan(
    channel: grpc.aio.Channel, operator_token: str
) -> None:
    starter = await make_tenant(channel, operator_token, plan="starter")
    md = starter.metadata("viewer")
    error = await rpc_error(
        starter.workflows.ListWorkflows(
            api.ListWorkflowsRequest(environment="sandbox"), metadata=md
        )
    )
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SANDBOX_DISABLED")
    listed = await starter.workflows.ListWorkflows(
        api.ListWorkflowsRequest(environment="production"), metadata=md
    )
    assert list(listed.workflows) == []
