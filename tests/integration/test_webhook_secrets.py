"""Per-workflow webhook signing secrets (SPEC §4) over real gRPC and PostgreSQL:
shown once to the tenant, rotated with a grace period, read by the
orchestrator alone over mutual TLS."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import grpc
import psycopg
from eventflow.registry.v1 import webhook_secret_service_pb2 as ws
from eventflow.registry.v1 import webhook_secret_service_pb2_grpc as ws_grpc
from eventflow.registry.v1 import workflow_service_pb2 as api

from cli.stack import Stack
from libs.identity import ServiceCertificates
from libs.registry_client import WebhookSecrets
from tests.conftest import Tenant, bearer, make_tenant, service_channel
from tests.integration.helpers import rpc_error, workflow


async def create(tenant: Tenant) -> api.CreateWorkflowResponse:
    return await tenant.workflows.CreateWorkflow(
        api.CreateWorkflowRequest(project_id=tenant.project, workflow=workflow()),
        metadata=tenant.metadata("developer"),
    )


async def rotate(tenant: Tenant, workflow_id: str, role: str = "developer") -> str:
    response = await tenant.workflows.RotateWebhookSigningSecret(
        api.RotateWebhookSigningSecretRequest(id=workflow_id), metadata=tenant.metadata(role)
    )
    return response.webhook_signing_secret


async def lookup(stack: Stack, pki: Path, workflow_id: str) -> ws.GetWebhookSigningSecretsResponse:
    async with service_channel(stack, pki, "orchestrator") as channel:
        stub = ws_grpc.WebhookSecretServiceStub(channel)
        return await stub.GetWebhookSigningSecrets(
            ws.GetWebhookSigningSecretsRequest(workflow_id=workflow_id), timeout=5
        )


def assert_well_formed(secret: str) -> None:
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32


async def test_the_secret_is_shown_on_create_and_never_by_get_or_list(tenant: Tenant) -> None:
    first, second = await create(tenant), await create(tenant)
    secret = first.webhook_signing_secret
    assert_well_formed(secret)
    assert second.webhook_signing_secret != secret

    viewer = tenant.metadata("viewer")
    got = await tenant.workflows.GetWorkflow(
        api.GetWorkflowRequest(id=first.workflow.id), metadata=viewer
    )
    listed = await tenant.workflows.ListWorkflows(
        api.ListWorkflowsRequest(project_id=tenant.project), metadata=viewer
    )
    assert got.workflow == first.workflow
    assert {w.id for w in listed.workflows} == {first.workflow.id, second.workflow.id}
    for response in (got, listed):
        assert secret.encode() not in response.SerializeToString()
        assert secret.removeprefix("whsec_").encode() not in response.SerializeToString()


async def test_rotation_returns_a_new_secret_and_keeps_the_old_one_as_previous(
    tenant: Tenant, stack: Stack, pki: Path
) -> None:
    created = await create(tenant)
    wf_id, original = created.workflow.id, created.webhook_signing_secret
    before = await lookup(stack, pki, wf_id)
    assert (before.secret, before.previous_secret) == (original, "")

    rotated = await rotate(tenant, wf_id)
    assert_well_formed(rotated)
    assert rotated != original
    after = await lookup(stack, pki, wf_id)
    assert (after.secret, after.previous_secret) == (rotated, original)

    # A second rotation keeps one previous secret: the one it replaced.
    again = await rotate(tenant, wf_id)
    latest = await lookup(stack, pki, wf_id)
    assert (latest.secret, latest.previous_secret) == (again, rotated)


async def test_the_registry_client_returns_current_then_previous(
    tenant: Tenant, stack: Stack, pki: Path
) -> None:
    created = await create(tenant)
    wf_id = created.workflow.id
    rotated = await rotate(tenant, wf_id)
    client = WebhookSecrets(stack.internal_address, ServiceCertificates.load(pki, "orchestrator"))
    try:
        assert await client.for_workflow(wf_id) == [rotated, created.webhook_signing_secret]
    finally:
        await client.close()


async def test_a_previous_secret_expires_24_hours_after_the_rotation(
    tenant: Tenant, stack: Stack, pki: Path, database_url: str
) -> None:
    created = await create(tenant)
    wf_id = created.workflow.id
    rotated = await rotate(tenant, wf_id)
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        await conn.execute(
            "UPDATE registry.webhook_secrets SET rotate_time = now() - interval '24 hours 1 minute'"
            " WHERE workflow_id = %s",
            (uuid.UUID(wf_id),),
        )
        await conn.commit()
    found = await lookup(stack, pki, wf_id)
    assert (found.secret, found.previous_secret) == (rotated, "")


async def test_rotation_needs_the_developer_role(tenant: Tenant) -> None:
    created = await create(tenant)
    error = await rpc_error(rotate(tenant, created.workflow.id, role="viewer"))
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_TOO_LOW")


async def test_another_organization_cannot_rotate_a_secret(
    tenant: Tenant, channel: grpc.aio.Channel, operator_token: str, stack: Stack, pki: Path
) -> None:
    created = await create(tenant)
    other = await make_tenant(channel, operator_token)
    error = await rpc_error(rotate(other, created.workflow.id, role="admin"))
    # Exactly what a workflow that does not exist at all gets: nothing leaks.
    assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
    assert error.message == f"workflow {created.workflow.id!r} not found"
    unchanged = await lookup(stack, pki, created.workflow.id)
    assert (unchanged.secret, unchanged.previous_secret) == (created.webhook_signing_secret, "")


async def test_the_lookup_answers_the_orchestrator_only(
    tenant: Tenant, stack: Stack, pki: Path, operator_token: str
) -> None:
    created = await create(tenant)
    request = ws.GetWebhookSigningSecretsRequest(workflow_id=created.workflow.id)
    public = ws_grpc.WebhookSecretServiceStub(tenant.channel)
    for metadata in (tenant.metadata("admin"), bearer(operator_token)):
        error = await rpc_error(public.GetWebhookSigningSecrets(request, metadata=metadata))
        assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "SERVICE_ONLY")
        assert created.webhook_signing_secret not in error.message
    async with service_channel(stack, pki, "executor") as executor:
        stub = ws_grpc.WebhookSecretServiceStub(executor)
        error = await rpc_error(stub.GetWebhookSigningSecrets(request, timeout=5))
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "SERVICE_ONLY")


async def test_the_lookup_of_an_unknown_or_deleted_workflow_is_not_found(
    tenant: Tenant, stack: Stack, pki: Path
) -> None:
    created = await create(tenant)
    await tenant.workflows.DeleteWorkflow(
        api.DeleteWorkflowRequest(id=created.workflow.id), metadata=tenant.metadata("developer")
    )
    for workflow_id in (created.workflow.id, str(uuid.uuid4())):
        error = await rpc_error(lookup(stack, pki, workflow_id))
        assert error.code == grpc.StatusCode.NOT_FOUND
    malformed = await rpc_error(lookup(stack, pki, "not-a-uuid"))
    assert malformed.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in malformed.violations] == ["workflow_id"]
