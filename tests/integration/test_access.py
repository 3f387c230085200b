"""Authentication, roles and tenant isolation (SPEC §2) over real gRPC."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from eventflow.registry.v1 import tenancy_service_pb2 as tn
from eventflow.registry.v1 import workflow_pb2 as wf
from eventflow.registry.v1 import workflow_service_pb2 as api
from google.protobuf.field_mask_pb2 import FieldMask

from tests.conftest import Tenant, bearer, make_tenant
from tests.integration.helpers import rpc_error, workflow


async def create_published(tenant: Tenant, **kw: object) -> wf.Workflow:
    created = await tenant.workflows.CreateWorkflow(
        api.CreateWorkflowRequest(project_id=tenant.project, workflow=workflow(**kw)),  # type: ignore[arg-type]
        metadata=tenant.metadata("developer"),
    )
    await tenant.workflows.PublishWorkflow(
        api.PublishWorkflowRequest(id=created.workflow.id), metadata=tenant.metadata("developer")
    )
    return created.workflow


def write_calls(
    tenant: Tenant, workflow_id: str, metadata: tuple[tuple[str, str], ...]
) -> list[Callable[[], Awaitable[Any]]]:
    w = tenant.workflows
    return [
        lambda: w.CreateWorkflow(
            api.CreateWorkflowRequest(project_id=tenant.project, workflow=workflow()),
            metadata=metadata,
        ),
        lambda: w.UpdateWorkflow(
            api.UpdateWorkflowRequest(
                workflow=wf.Workflow(id=workflow_id, name="x"),
                update_mask=FieldMask(paths=["name"]),
            ),
            metadata=metadata,
        ),
        lambda: w.PublishWorkflow(api.PublishWorkflowRequest(id=workflow_id), metadata=metadata),
        lambda: w.DisableWorkflow(api.DisableWorkflowRequest(id=workflow_id), metadata=metadata),
        lambda: w.EnableWorkflow(api.EnableWorkflowRequest(id=workflow_id), metadata=metadata),
        lambda: w.ArchiveWorkflow(api.ArchiveWorkflowRequest(id=workflow_id), metadata=metadata),
        lambda: w.DeleteWorkflow(api.DeleteWorkflowRequest(id=workflow_id), metadata=metadata),
    ]


def read_calls(
    tenant: Tenant, workflow_id: str, metadata: tuple[tuple[str, str], ...]
) -> list[Callable[[], Awaitable[Any]]]:
    w = tenant.workflows
    return [
        lambda: w.GetWorkflow(api.GetWorkflowRequest(id=workflow_id), metadata=metadata),
        lambda: w.PreviewPublish(api.PreviewPublishRequest(id=workflow_id), metadata=metadata),
        lambda: w.ListWorkflowVersions(
            api.ListWorkflowVersionsRequest(workflow_id=workflow_id), metadata=metadata
        ),
        lambda: w.GetWorkflowVersion(
            api.GetWorkflowVersionRequest(workflow_id=workflow_id, version=1), metadata=metadata
        ),
    ]


async def test_a_call_without_a_key_is_unauthenticated(tenant: Tenant) -> None:
    error = await rpc_error(
        tenant.workflows.ListWorkflows(api.ListWorkflowsRequest(project_id=tenant.project))
    )
    assert (error.code, error.reason) == (grpc.StatusCode.UNAUTHENTICATED, "MISSING_CREDENTIALS")


@pytest.mark.parametrize(
    "token",
    ["nonsense", "efk_aaaaaaaaaaaa_" + "A" * 43, "Basic abc"],
    ids=["garbage", "unknown-key", "wrong-scheme"],
)
async def test_an_unknown_or_malformed_key_is_unauthenticated(tenant: Tenant, token: str) -> None:
    error = await rpc_error(
        tenant.workflows.ListWorkflows(
            api.ListWorkflowsRequest(project_id=tenant.project), metadata=bearer(token)
        )
    )
    assert error.code == grpc.StatusCode.UNAUTHENTICATED


async def test_a_key_with_a_wrong_secret_is_refused(tenant: Tenant) -> None:
    real = tenant.keys["admin"]
    forged = real[:-4] + ("AAAA" if not real.endswith("AAAA") else "BBBB")
    error = await rpc_error(
        tenant.workflows.ListWorkflows(
            api.ListWorkflowsRequest(project_id=tenant.project), metadata=bearer(forged)
        )
    )
    assert (error.code, error.reason) == (grpc.StatusCode.UNAUTHENTICATED, "INVALID_API_KEY")


async def test_a_revoked_key_stops_working(tenant: Tenant) -> None:
    created = await tenant.tenancy.CreateApiKey(
        tn.CreateApiKeyRequest(role="developer"), metadata=tenant.metadata("admin")
    )
    listing = api.ListWorkflowsRequest(project_id=tenant.project)
    await tenant.workflows.ListWorkflows(listing, metadata=bearer(created.secret))
    revoked = await tenant.tenancy.RevokeApiKey(
        tn.RevokeApiKeyRequest(id=created.api_key.id), metadata=tenant.metadata("admin")
    )
    assert revoked.api_key.revoked
    error = await rpc_error(
        tenant.workflows.ListWorkflows(listing, metadata=bearer(created.secret))
    )
    assert error.code == grpc.StatusCode.UNAUTHENTICATED


async def test_viewers_read_but_cannot_write(tenant: Tenant) -> None:
    target = await create_published(tenant)
    viewer = tenant.metadata("viewer")
    for call in read_calls(tenant, target.id, viewer):
        await call()
    for call in write_calls(tenant, target.id, viewer):
        error = await rpc_error(call())
        assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_TOO_LOW")


async def test_developers_write_workflows_but_do_not_manage_keys_or_projects(
    tenant: Tenant,
) -> None:
    target = await create_published(tenant)
    dev = tenant.metadata("developer")
    for call in write_calls(tenant, target.id, dev)[:4]:
        await call()
    for call in (
        tenant.tenancy.CreateApiKey(tn.CreateApiKeyRequest(role="admin"), metadata=dev),
        tenant.tenancy.ListApiKeys(tn.ListApiKeysRequest(), metadata=dev),
        tenant.tenancy.CreateProject(
            tn.CreateProjectRequest(project=tn.Project(id="other")), metadata=dev
        ),
    ):
        error = await rpc_error(call)
        assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_TOO_LOW")


async def test_admins_manage_projects_and_keys_but_not_organizations(tenant: Tenant) -> None:
    admin = tenant.metadata("admin")
    project = await tenant.tenancy.CreateProject(
        tn.CreateProjectRequest(project=tn.Project(id="billing", display_name="Billing")),
        metadata=admin,
    )
    assert project.project.organization_id == tenant.org
    projects = await tenant.tenancy.ListProjects(tn.ListProjectsRequest(), metadata=admin)
    assert [p.id for p in projects.projects] == ["billing", "main"]
    keys = await tenant.tenancy.ListApiKeys(tn.ListApiKeysRequest(), metadata=admin)
    assert sorted(k.role for k in keys.api_keys) == ["admin", "developer", "viewer"]
    # The secret is everything after "efk_<12-char id>_" (it may itself contain "_").
    assert all(tenant.keys[k.role].split("_", 2)[2] not in str(k) for k in keys.api_keys)
    error = await rpc_error(
        tenant.tenancy.CreateOrganization(
            tn.CreateOrganizationRequest(
                organization=tn.Organization(id="rogue", plan="enterprise")
            ),
            metadata=admin,
        )
    )
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "OPERATOR_ONLY")
    error = await rpc_error(
        tenant.tenancy.UpdateOrganizationPlan(
            tn.UpdateOrganizationPlanRequest(id=tenant.org, plan="enterprise"), metadata=admin
        )
    )
    assert error.reason == "OPERATOR_ONLY"


async def test_another_organization_sees_nothing_and_changes_nothing(
    tenant: Tenant, channel: grpc.aio.Channel, operator_token: str
) -> None:
    theirs = await create_published(tenant)
    intruder = await make_tenant(channel, operator_token)
    admin = intruder.metadata("admin")
    missing = str(uuid.uuid4())
    for call in read_calls(tenant, theirs.id, admin) + write_calls(tenant, theirs.id, admin)[1:]:
        error = await rpc_error(call())
        assert error.code == grpc.StatusCode.NOT_FOUND
    # Indistinguishable from a workflow that does not exist at all.
    unknown = await rpc_error(
        tenant.workflows.GetWorkflow(api.GetWorkflowRequest(id=missing), metadata=admin)
    )
    leaked = await rpc_error(
        tenant.workflows.GetWorkflow(api.GetWorkflowRequest(id=theirs.id), metadata=admin)
    )
    assert leaked.message.replace(theirs.id, missing) == unknown.message
    listed = await tenant.workflows.ListWorkflows(
        api.ListWorkflowsRequest(project_id="main"), metadata=admin
    )
    assert theirs.id not in [w.id for w in listed.workflows]
    for call in (
        tenant.tenancy.ListApiKeys(
            tn.ListApiKeysRequest(organization_id=tenant.org), metadata=admin
        ),
        tenant.tenancy.CreateApiKey(
            tn.CreateApiKeyRequest(organization_id=tenant.org, role="admin"), metadata=admin
        ),
        tenant.tenancy.GetOrganization(tn.GetOrganizationRequest(id=tenant.org), metadata=admin),
    ):
        error = await rpc_error(call)
        assert error.code == grpc.StatusCode.PERMISSION_DENIED
    still = await tenant.workflows.GetWorkflow(
        api.GetWorkflowRequest(id=theirs.id), metadata=tenant.metadata("viewer")
    )
    assert (
        still.workflow
        == (
            await tenant.workflows.GetWorkflow(
                api.GetWorkflowRequest(id=theirs.id), metadata=tenant.metadata("admin")
            )
        ).workflow
    )
    assert still.workflow.status == "active" and still.workflow.name == "Welcome"


async def test_a_project_bound_key_is_confined_to_its_project(
    channel: grpc.aio.Channel, operator_token: str
) -> None:
    tenant = await make_tenant(channel, operator_token, project_key=True)
    op = bearer(operator_token)
    await tenant.tenancy.CreateProject(
        tn.CreateProjectRequest(organization_id=tenant.org, project=tn.Project(id="other")),
        metadata=op,
    )
    org_key = await tenant.tenancy.CreateApiKey(
        tn.CreateApiKeyRequest(organization_id=tenant.org, role="developer"), metadata=op
    )
    elsewhere = await tenant.workflows.CreateWorkflow(
        api.CreateWorkflowRequest(project_id="other", workflow=workflow()),
        metadata=bearer(org_key.secret),
    )
    dev = tenant.metadata("developer")
    # The key's own project is the default.
    mine = await tenant.workflows.CreateWorkflow(
        api.CreateWorkflowRequest(workflow=workflow()), metadata=dev
    )
    assert mine.workflow.project_id == "main"
    error = await rpc_error(
        tenant.workflows.CreateWorkflow(
            api.CreateWorkflowRequest(project_id="other", workflow=workflow()), metadata=dev
        )
    )
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "PROJECT_NOT_ALLOWED")
    error = await rpc_error(
        tenant.workflows.GetWorkflow(api.GetWorkflowRequest(id=elsewhere.workflow.id), metadata=dev)
    )
    assert error.code == grpc.StatusCode.NOT_FOUND
    listed = await tenant.workflows.ListWorkflows(api.ListWorkflowsRequest(), metadata=dev)
    assert [w.id for w in listed.workflows] == [mine.workflow.id]


async def test_sandbox_needs_a_team_or_enterprise_plan(
    channel: grpc.aio.Channel, operator_token: str
) -> None:
    starter = await make_tenant(channel, operator_token, plan="starter")
    request = api.CreateWorkflowRequest(
        project_id=starter.project, workflow=workflow(environment="sandbox")
    )
    error = await rpc_error(
        starter.workflows.CreateWorkflow(request, metadata=starter.metadata("developer"))
    )
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SANDBOX_DISABLED")
    # Production is fine on every plan, and the upgrade unlocks sandbox.
    await starter.workflows.CreateWorkflow(
        api.CreateWorkflowRequest(project_id=starter.project, workflow=workflow()),
        metadata=starter.metadata("developer"),
    )
    await starter.tenancy.UpdateOrganizationPlan(
        tn.UpdateOrganizationPlanRequest(id=starter.org, plan="team"),
        metadata=bearer(operator_token),
    )
    created = await starter.workflows.CreateWorkflow(
        request, metadata=starter.metadata("developer")
    )
    assert created.workflow.environment == "sandbox"


async def test_organization_ids_are_unique_and_validated(
    tenant: Tenant, operator_token: str
) -> None:
    op = bearer(operator_token)
    error = await rpc_error(
        tenant.tenancy.CreateOrganization(
            tn.CreateOrganizationRequest(organization=tn.Organization(id=tenant.org)), metadata=op
        )
    )
    assert error.code == grpc.StatusCode.ALREADY_EXISTS
    error = await rpc_error(
        tenant.tenancy.CreateOrganization(
            tn.CreateOrganizationRequest(organization=tn.Organization(id="Bad Org!")), metadata=op
        )
    )
    assert [v.field for v in error.violations] == ["organization.id"]
    error = await rpc_error(
        tenant.tenancy.CreateOrganization(
            tn.CreateOrganizationRequest(organization=tn.Organization(id="fine", plan="gold")),
            metadata=op,
        )
    )
    assert [v.field for v in error.violations] == ["organization.plan"]
