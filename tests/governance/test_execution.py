"""The executor end to end: governance's decisions reach it over the action
state topic, it fails closed, answers only the orchestrator, and injects
exactly the approved-and-stored secrets from the real vault."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
from eventflow.executor.v1 import executor_service_pb2 as ex
from eventflow.executor.v1 import executor_service_pb2_grpc as ex_grpc
from eventflow.governance.v1 import action_service_pb2 as api
from eventflow.registry.v1 import workflow_pb2 as wf
from eventflow.registry.v1 import workflow_service_pb2 as wf_api
from eventflow.vault.v1 import secret_service_pb2 as vault_api
from eventflow.vault.v1 import secret_service_pb2_grpc as vault_grpc
from google.protobuf.field_mask_pb2 import FieldMask

from cli.stack import Stack
from tests.conftest import service_channel
from tests.governance.conftest import ActionsClient
from tests.governance.modules import ECHO, variant, wasm
from tests.integration.helpers import action, rpc_error, workflow


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """State moves over Kafka: poll until it has arrived (bounded)."""
    for _ in range(300):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Orchestrator:
    """Calls the executor the way the orchestrator does: over mTLS, as `orchestrator`."""

    def __init__(self, stack: Stack, pki: Path, identity: str = "orchestrator") -> None:
        self.channel = service_channel(stack, pki, identity)
        self.stub = ex_grpc.ExecutorServiceStub(self.channel)

    async def run(self, org: str, ref: str, version: int = 0, payload: str = "{}") -> ex.RunResult:
        request = ex.ExecuteRequest(
            organization_id=org, action=ref, version=version, payload_json=payload
        )
        return (await self.stub.Execute(request, timeout=30)).result


async def approved_echo(actions: ActionsClient, permissions: str = "") -> str:
    name = f"echo-{uuid.uuid4().hex[:8]}"
    await actions.upload(name, wasm(ECHO), permissions=permissions)
    await actions.review(name, 1)
    return name


async def test_an_approved_action_runs_once_its_state_arrives(
    actions: ActionsClient, stack: Stack, pki: Path
) -> None:
    orchestrator = Orchestrator(stack, pki)
    name = f"echo-{uuid.uuid4().hex[:8]}"
    await actions.upload(name, wasm(ECHO))
    org = actions.tenant.org
    pending = await orchestrator.run(org, name)
    assert (pending.ok, pending.failure_reason) == (False, "ACTION_NOT_APPROVED")
    await actions.review(name, 1)

    async def runs() -> bool:
        return (await orchestrator.run(org, name)).ok

    await eventually(runs, "the approval to reach the executor")
    result = await orchestrator.run(org, name, payload='{"orderId": "o-9"}')
    assert json.loads(result.output_json)["payload"] == {"orderId": "o-9"}
    assert (result.version, len(result.sha256)) == (1, 64)


async def test_the_executor_fails_closed(actions: ActionsClient, stack: Stack, pki: Path) -> None:
    orchestrator = Orchestrator(stack, pki)
    org = actions.tenant.org
    name = await approved_echo(actions)
    await actions.upload(name, variant(ECHO, 2))  # version 2 stays pending

    async def ready() -> bool:
        return (await orchestrator.run(org, name)).ok

    await eventually(ready, "approval")
    assert (await orchestrator.run(org, name, version=2)).failure_reason == "ACTION_NOT_APPROVED"
    assert (await orchestrator.run(org, name, version=1)).ok
    assert (await orchestrator.run(org, "no-such-action")).failure_reason == "ACTION_NOT_APPROVED"
    assert (await orchestrator.run("some-other-org", name)).failure_reason == "ACTION_NOT_APPROVED"

    await actions.stub.DisableAction(
        api.DisableActionRequest(action=name), metadata=actions.md("admin")
    )

    async def disabled() -> bool:
        return (await orchestrator.run(org, name)).failure_reason == "ACTION_DISABLED"

    await eventually(disabled, "the kill switch")
    await actions.stub.EnableAction(
        api.EnableActionRequest(action=name), metadata=actions.md("admin")
    )
    await eventually(ready, "re-enabling")


async def test_only_the_orchestrator_may_execute(
    actions: ActionsClient, stack: Stack, pki: Path
) -> None:
    name = await approved_echo(actions)
    as_governance = Orchestrator(stack, pki, identity="governance")
    error = await rpc_error(as_governance.run(actions.tenant.org, name))
    assert error.reason == "SERVICE_ONLY"
    public = ex_grpc.ExecutorServiceStub(actions.tenant.channel)
    error = await rpc_error(
        public.Execute(
            ex.ExecuteRequest(organization_id=actions.tenant.org, action=name),
            metadata=actions.md("admin"),
        )
    )
    assert error.reason == "SERVICE_ONLY"


async def test_secrets_are_the_approved_and_stored_ones_from_the_vault(
    actions: ActionsClient, stack: Stack, pki: Path
) -> None:
    name = await approved_echo(actions, "read_secret:API_TOKEN, read_secret:NOT_STORED")
    vault = vault_grpc.SecretServiceStub(actions.tenant.channel)
    for key, value in (("API_TOKEN", "tok-live-123"), ("UNDECLARED", "never-injected")):
        await vault.SetSecret(
            vault_api.SetSecretRequest(action=name, key=key, value=value),
            metadata=actions.md("developer"),
        )
    orchestrator = Orchestrator(stack, pki)

    async def ready() -> bool:
        return (await orchestrator.run(actions.tenant.org, name)).ok

    await eventually(ready, "approval")
    result = await orchestrator.run(actions.tenant.org, name)
    assert json.loads(result.output_json)["secrets"] == {"API_TOKEN": "tok-live-123"}


async def test_usages_follow_drafts_and_published_versions_and_block_deletion(
    actions: ActionsClient,
) -> None:
    tenant = actions.tenant
    name = await approved_echo(actions)
    dev = tenant.metadata("developer")
    created = await tenant.workflows.CreateWorkflow(
        wf_api.CreateWorkflowRequest(
            project_id=tenant.project, workflow=workflow(steps=[action(name)])
        ),
        metadata=dev,
    )
    wf_id = created.workflow.id

    async def usage() -> list[tuple[bool, bool]]:
        listed = await actions.stub.ListActionUsages(
            api.ListActionUsagesRequest(action=name), metadata=actions.md("viewer")
        )
        return [(u.in_draft, u.in_published) for u in listed.usages if u.workflow_id == wf_id]

    async def usage_is(expected: list[tuple[bool, bool]]) -> bool:
        return await usage() == expected

    await eventually(lambda: usage_is([(True, False)]), "the draft usage")
    await tenant.workflows.PublishWorkflow(wf_api.PublishWorkflowRequest(id=wf_id), metadata=dev)
    await eventually(lambda: usage_is([(True, True)]), "the published usage")
    error = await rpc_error(
        actions.stub.DeleteAction(
            api.DeleteActionRequest(action=name), metadata=actions.md("admin")
        )
    )
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "ACTION_IN_USE")
    assert wf_id in error.message
    await tenant.workflows.UpdateWorkflow(
        wf_api.UpdateWorkflowRequest(
            workflow=wf.Workflow(id=wf_id, steps=[wf.Step(type="delay", duration_ms=1000)]),
            update_mask=FieldMask(paths=["steps"]),
        ),
        metadata=dev,
    )
    await eventually(lambda: usage_is([(False, True)]), "the draft to drop the action")
    await tenant.workflows.ArchiveWorkflow(wf_api.ArchiveWorkflowRequest(id=wf_id), metadata=dev)
    await eventually(lambda: usage_is([]), "the archived workflow to stop counting")
    await actions.stub.DeleteAction(
        api.DeleteActionRequest(action=name), metadata=actions.md("admin")
    )
    error = await rpc_error(
        actions.stub.GetAction(api.GetActionRequest(action=name), metadata=actions.md("viewer"))
    )
    assert error.code == grpc.StatusCode.NOT_FOUND
