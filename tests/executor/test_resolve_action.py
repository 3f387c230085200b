"""ResolveAction: which version Execute would run, or why it would refuse, running nothing.

The orchestrator's dry runs ask it; only the orchestrator's service identity
is answered, exactly like Execute.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from eventflow.executor.v1 import executor_service_pb2 as ex
from eventflow.executor.v1 import executor_service_pb2_grpc as ex_grpc
from eventflow.governance.v1 import action_service_pb2 as api
from eventflow.governance.v1 import action_state_pb2 as st

from cli.stack import Stack
from libs.errors import EventflowError
from services.executor.catalog import ActionCatalog
from services.executor.execution import Execution
from tests.conftest import make_tenant, service_channel
from tests.governance.conftest import ActionsClient
from tests.governance.modules import ECHO, variant, wasm
from tests.integration.helpers import rpc_error


class Unused:
    """Sandbox, modules and secrets: resolving must touch none of them."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"ResolveAction used {name}")


def execution(catalog: ActionCatalog) -> Execution:
    return Execution(catalog, Unused(), Unused(), Unused())


def state(enabled: bool = True, revision: int = 1) -> st.ActionState:
    return st.ActionState(
        action_id="a-1",
        organization_id="acme",
        name="score",
        enabled=enabled,
        approved_versions=[st.RunnableVersion(version=v, sha256=f"sha{v}") for v in (2, 1)],
        revision=revision,
    )


def request(action: str = "score", version: int = 0, org: str = "acme") -> ex.ResolveActionRequest:
    return ex.ResolveActionRequest(organization_id=org, action=action, version=version)


def test_the_newest_approved_version_is_the_answer_by_name_or_id() -> None:
    catalog = ActionCatalog()
    catalog.apply("a-1", state())
    for ref in ("score", "a-1"):
        answer = execution(catalog).resolve(request(ref))
        assert answer == ex.ResolveActionResponse(
            runnable=True, action_id="a-1", name="score", version=2, sha256="sha2"
        )
    assert execution(catalog).resolve(request(version=1)).version == 1


def test_refusals_carry_the_reason_execute_would_give() -> None:
    catalog = ActionCatalog()
    catalog.apply("a-1", state())
    pinned = execution(catalog).resolve(request(version=3))
    assert (pinned.runnable, pinned.refusal_reason) == (False, "ACTION_NOT_APPROVED")
    assert "version 3" in pinned.refusal_message
    foreign = execution(catalog).resolve(request(org="globex"))
    assert (foreign.runnable, foreign.refusal_reason) == (False, "ACTION_NOT_APPROVED")
    assert foreign.action_id == "" and foreign.version == 0
    catalog.apply("a-1", state(enabled=False, revision=2))
    disabled = execution(catalog).resolve(request())
    assert (disabled.runnable, disabled.refusal_reason) == (False, "ACTION_DISABLED")
    switched_off = ActionCatalog(all_disabled=True)
    switched_off.apply("a-1", state())
    assert execution(switched_off).resolve(request()).refusal_reason == "ACTION_DISABLED"


def test_organization_and_action_are_required() -> None:
    for bad, field in ((request(org=""), "organization_id"), (request(action=""), "action")):
        with pytest.raises(EventflowError) as caught:
            execution(ActionCatalog()).resolve(bad)
        assert [v.field for v in caught.value.violations] == [field]


# ---------------------------------------------------------------- over mTLS


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Governance's decisions reach the executor over Kafka: poll (bounded)."""
    for _ in range(300):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Caller:
    def __init__(self, stack: Stack, pki: Path, identity: str) -> None:
        self.channel = service_channel(stack, pki, identity)
        self.stub = ex_grpc.ExecutorServiceStub(self.channel)

    async def resolve(self, org: str, action: str, version: int = 0) -> ex.ResolveActionResponse:
        return await self.stub.ResolveAction(request(action, version, org), timeout=10)


async def test_the_orchestrator_learns_what_would_run_without_running_it(
    stack: Stack, pki: Path, channel: grpc.aio.Channel, operator_token: str
) -> None:
    actions = ActionsClient(await make_tenant(channel, operator_token))
    org = actions.tenant.org
    orchestrator = Caller(stack, pki, "orchestrator")
    name = f"echo-{uuid.uuid4().hex[:8]}"
    await actions.upload(name, wasm(ECHO))
    pending = await orchestrator.resolve(org, name)
    assert (pending.runnable, pending.refusal_reason) == (False, "ACTION_NOT_APPROVED")
    await actions.review(name, 1)
    await actions.upload(name, variant(ECHO, 2))  # version 2 stays pending

    async def approved() -> bool:
        return (await orchestrator.resolve(org, name)).runnable

    await eventually(approved, "the approval to reach the executor")
    answer = await orchestrator.resolve(org, name)
    assert (answer.name, answer.version, len(answer.sha256)) == (name, 1, 64)
    assert (await orchestrator.resolve(org, name, 2)).refusal_reason == "ACTION_NOT_APPROVED"
    assert (await orchestrator.resolve("some-other-org", name)).refusal_reason == (
        "ACTION_NOT_APPROVED"
    )
    await actions.stub.DisableAction(
        api.DisableActionRequest(action=name), metadata=actions.md("admin")
    )

    async def disabled() -> bool:
        return (await orchestrator.resolve(org, name)).refusal_reason == "ACTION_DISABLED"

    await eventually(disabled, "the kill switch")


async def test_only_the_orchestrator_may_resolve(
    stack: Stack, pki: Path, channel: grpc.aio.Channel, operator_token: str
) -> None:
    tenant = await make_tenant(channel, operator_token)
    for identity in ("governance", "vault"):
        error = await rpc_error(Caller(stack, pki, identity).resolve(tenant.org, "anything"))
        assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "SERVICE_ONLY")
    public = ex_grpc.ExecutorServiceStub(tenant.channel)
    error = await rpc_error(
        public.ResolveAction(request("anything", org=tenant.org), metadata=tenant.metadata("admin"))
    )
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "SERVICE_ONLY")
