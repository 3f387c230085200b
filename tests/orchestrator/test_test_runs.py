"""Test runs (SPEC §7): a dry run says what would happen and writes nothing; a hot
run runs the workflow for real, marked as a test, and starts no other workflow."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
import psycopg
from aiokafka import AIOKafkaProducer
from eventflow.governance.v1 import action_service_pb2 as actions_api
from eventflow.orchestrator.v1 import event_service_pb2 as ev
from eventflow.orchestrator.v1 import instance_service_pb2 as inst
from eventflow.orchestrator.v1 import test_run_service_pb2 as pb
from eventflow.orchestrator.v1 import test_run_service_pb2_grpc as pb_grpc
from eventflow.registry.v1 import tenancy_service_pb2 as tenancy_api
from eventflow.registry.v1 import workflow_pb2 as wf
from eventflow.registry.v1 import workflow_service_pb2 as wf_api
from google.protobuf.field_mask_pb2 import FieldMask

from libs.errors import read_error
from tests.conftest import Tenant, bearer, make_tenant
from tests.governance.conftest import ActionsClient
from tests.governance.modules import ECHO, wasm
from tests.integration.helpers import rpc_error
from tests.orchestrator.conftest import (
    Orchestrated,
    Receiver,
    create_and_publish,
    eventually,
    send_structured,
)
from tests.orchestrator.test_effects import approved
from tests.orchestrator.test_end_to_end import approved_echo, trigger

T = TypeVar("T")
NOT_ARRIVED = ("NOT_FOUND", "WORKFLOW_NOT_PUBLISHED")
METADATA_URL = "http://169.254.169.254/latest/meta-data/"
# Every orchestrator table a run could write to, counted for one organization.
FOOTPRINT = {
    "events": "SELECT count(*) FROM orchestrator.events WHERE organization_id = %(org)s",
    "instances": "SELECT count(*) FROM orchestrator.instances WHERE organization_id = %(org)s",
    "instance_log": "SELECT count(*) FROM orchestrator.instance_log l"
    " JOIN orchestrator.instances i ON i.id = l.instance_id WHERE i.organization_id = %(org)s",
    "dead_letters": "SELECT count(*) FROM orchestrator.dead_letters"
    " WHERE organization_id = %(org)s",
    # Outbox records carry their tenant in the CloudEvent or DLQ record they hold.
    "outbox": "SELECT count(*) FROM orchestrator.outbox"
    " WHERE position(convert_to(%(org)s, 'UTF8') in value) > 0",
    "projections": "SELECT count(*) FROM orchestrator.projections WHERE organization_id = %(org)s",
}


def runs(tenant: Tenant) -> pb_grpc.TestRunServiceStub:
    return pb_grpc.TestRunServiceStub(tenant.channel)


def payload_text(payload: dict[str, Any] | str) -> str:
    return payload if isinstance(payload, str) else json.dumps(payload)


async def dry_run(
    tenant: Tenant,
    workflow_id: str,
    payload: dict[str, Any] | str,
    *,
    draft: bool = False,
    role: str = "developer",
) -> pb.DryRunWorkflowResponse:
    request = pb.DryRunWorkflowRequest(
        workflow_id=workflow_id, draft=draft, payload_json=payload_text(payload)
    )
    return await runs(tenant).DryRunWorkflow(request, metadata=tenant.metadata(role))


async def hot_run(
    tenant: Tenant, workflow_id: str, payload: dict[str, Any] | str, *, draft: bool = False
) -> pb.HotRunWorkflowResponse:
    request = pb.HotRunWorkflowRequest(
        workflow_id=workflow_id, draft=draft, payload_json=payload_text(payload)
    )
    return await runs(tenant).HotRunWorkflow(request, metadata=tenant.metadata("developer"))


async def until(call: Callable[[], Awaitable[T]], ready: Callable[[T], bool], what: str) -> T:
    """Workflows, plans and action decisions reach the orchestrator and the executor over
    Kafka: call until the answer is ``ready``. Until a workflow arrives it is NOT_FOUND,
    and until its publish arrives it has no published version."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        try:
            answer = await call()
            if ready(answer):
                return answer
        except grpc.aio.AioRpcError as error:
            if read_error(error).reason not in NOT_ARRIVED:
                raise
            answer = None
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last answer: {answer}")
        await asyncio.sleep(0.1)


async def footprint(database_url: str, org: str) -> dict[str, int]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        counts = {}
        for table, query in FOOTPRINT.items():
            row = await (await conn.execute(query, {"org": org})).fetchone()
            assert row is not None
            counts[table] = int(row[0])
        return counts


async def create_draft(tenant: Tenant, event_type: str, steps: list[wf.Step], **kw: Any) -> str:
    created = await tenant.workflows.CreateWorkflow(
        wf_api.CreateWorkflowRequest(
            project_id=tenant.project,
            workflow=wf.Workflow(
                name=f"wf {event_type}", trigger_event=event_type, steps=steps, **kw
            ),
        ),
        metadata=tenant.metadata("developer"),
    )
    return str(created.workflow.id)


async def disabled_action(tenant: Tenant) -> str:
    actions = ActionsClient(tenant)
    name = await approved_echo(tenant)
    await actions.stub.DisableAction(
        actions_api.DisableActionRequest(action=name), metadata=actions.md("admin")
    )
    return name


async def pending_action(tenant: Tenant) -> str:
    name = f"pending-{uuid.uuid4().hex[:6]}"
    await ActionsClient(tenant).upload(name, wasm(ECHO))
    return name


def action(name: str, ref: str) -> wf.Step:
    return wf.Step(type="custom_action", name=name, action=ref)


async def test_a_dry_run_resolves_actions_and_guards_webhooks_for_published_and_draft(
    tenant: Tenant,
) -> None:
    approved, pending, killed = (
        await approved_echo(tenant),
        await pending_action(tenant),
        await disabled_action(tenant),
    )
    event_type = trigger()
    workflow_id, _ = await create_and_publish(
        tenant,
        event_type,
        [
            action("score", approved),
            action("pending", pending),
            action("killed", killed),
            wf.Step(type="webhook", name="metadata", url=METADATA_URL),
            wf.Step(type="delay", name="settle", duration_ms=5000),
        ],
    )
    plan = await until(
        lambda: dry_run(tenant, workflow_id, {"orderId": "o-1"}),
        lambda r: r.steps[0].runnable and r.steps[2].problem_reason == "ACTION_DISABLED",
        "the executor to know the approval and the kill switch",
    )
    assert (plan.workflow_id, plan.workflow_version, plan.environment, plan.trigger_event) == (
        workflow_id,
        1,
        "production",
        event_type,
    )
    score, waiting, disabled, metadata, settle = plan.steps
    assert (score.type, score.action, score.action_version, score.max_attempts) == (
        "custom_action",
        approved,
        1,
        3,
    )
    assert score.action_id and not score.problem_reason
    assert (waiting.runnable, waiting.problem_reason, waiting.action) == (
        False,
        "ACTION_NOT_APPROVED",
        pending,
    )
    assert (disabled.runnable, disabled.problem_reason) == (False, "ACTION_DISABLED")
    assert (metadata.runnable, metadata.problem_reason, metadata.url) == (
        False,
        "WEBHOOK_REFUSED",
        METADATA_URL,
    )
    assert "cloud metadata address" in metadata.problem and list(metadata.addresses) == []
    assert (metadata.max_attempts, settle.runnable, settle.duration_ms) == (5, True, 5000)
    assert [s.index for s in plan.steps] == [0, 1, 2, 3, 4]
    assert not plan.would_run

    await tenant.workflows.UpdateWorkflow(
        wf_api.UpdateWorkflowRequest(
            workflow=wf.Workflow(id=workflow_id, steps=[action("score", approved)]),
            update_mask=FieldMask(paths=["steps"]),
        ),
        metadata=tenant.metadata("developer"),
    )
    draft = await until(
        lambda: dry_run(tenant, workflow_id, {}, draft=True),
        lambda r: len(r.steps) == 1,
        "the edited draft to reach the orchestrator",
    )
    assert draft.workflow_version == 0 and draft.would_run
    assert (draft.steps[0].action, draft.steps[0].action_version) == (approved, 1)
    published = await dry_run(tenant, workflow_id, {})
    assert (published.workflow_version, len(published.steps)) == (1, 5)


async def test_a_never_published_workflow_can_be_walked_only_as_a_draft(tenant: Tenant) -> None:
    approved, pending = await approved_echo(tenant), await pending_action(tenant)
    workflow_id = await create_draft(
        tenant, trigger(), [action("score", approved), action("pending", pending)]
    )
    plan = await until(
        lambda: dry_run(tenant, workflow_id, {}, draft=True),
        lambda r: r.steps[0].runnable,
        "the draft and the approval to arrive",
    )
    assert plan.workflow_version == 0 and not plan.would_run
    assert (plan.steps[0].action, plan.steps[0].action_version) == (approved, 1)
    assert plan.steps[1].problem_reason == "ACTION_NOT_APPROVED"
    for call in (
        dry_run(tenant, workflow_id, {}),
        hot_run(tenant, workflow_id, {}),
    ):
        error = await rpc_error(call)
        assert (error.code, error.reason) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "WORKFLOW_NOT_PUBLISHED",
        )


async def test_a_dry_run_reports_the_reentry_decision_and_writes_nothing(
    tenant: Tenant, producer: AIOKafkaProducer, database_url: str
) -> None:
    approved = await approved_echo(tenant)
    event_type = trigger()
    workflow_id, _ = await create_and_publish(
        tenant, event_type, [action("score", approved)], reentry=wf.Reentry(mode="once")
    )
    o = Orchestrated(tenant)
    await until(
        lambda: dry_run(tenant, workflow_id, {}),
        lambda r: r.steps[0].runnable,
        "the workflow and the approval to arrive",
    )
    event_id = await send_structured(producer, tenant, event_type, {"userId": "u-1"})
    [reaction] = await o.settled(event_id)
    assert reaction.instance_status == "completed"

    before = await footprint(database_url, tenant.org)
    blocked = await dry_run(tenant, workflow_id, {"userId": "u-1"})
    fresh = await dry_run(tenant, workflow_id, {"userId": "u-2"}, draft=True)
    anonymous = await dry_run(tenant, workflow_id, {"orderId": "o-1"})
    assert await footprint(database_url, tenant.org) == before
    assert before["events"] >= 1 and before["instances"] >= 1  # the counts see this tenant

    assert (blocked.reentry.subject, blocked.reentry.mode, blocked.reentry.allowed) == (
        "u-1",
        "once",
        False,
    )
    assert blocked.reentry.reason.startswith("once:") and not blocked.would_run
    assert (fresh.reentry.subject, fresh.reentry.allowed, fresh.would_run) == ("u-2", True, True)
    assert (anonymous.reentry.subject, anonymous.reentry.allowed) == ("", True)
    assert anonymous.reentry.reason == "payload names no subject; re-entry not enforced"


async def test_a_hot_run_runs_only_this_workflow_marked_as_a_test(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    approved = await approved_echo(tenant)
    event_type = trigger()
    tested, secret = await create_and_publish(
        tenant,
        event_type,
        [action("score", approved), wf.Step(type="webhook", url=f"{receiver.url}/tested")],
        reentry=wf.Reentry(mode="once"),
    )
    receiver.secrets["/tested"] = secret
    other, _ = await create_and_publish(
        tenant, event_type, [wf.Step(type="webhook", url=f"{receiver.url}/other")]
    )
    o = Orchestrated(tenant)

    async def both_live() -> bool:
        probe = await send_structured(producer, tenant, event_type, {"probe": True})
        await asyncio.sleep(0.3)
        return len(await o.reactions(probe)) == 2

    await eventually(both_live, "both workflows to start on real events")

    run = await hot_run(tenant, tested, {"userId": "u-7", "amount": 3})
    assert run.event_id.startswith("test-")
    done = await until(
        lambda: o.instances.GetInstance(inst.GetInstanceRequest(id=run.instance_id), metadata=o.md),
        lambda r: r.instance.status in ("completed", "failed"),
        "the test instance to finish",
    )
    instance = done.instance
    assert (instance.status, instance.is_test, instance.workflow_id) == ("completed", True, tested)
    assert (instance.workflow_version, instance.event_id) == (1, run.event_id)
    [reaction] = await o.reactions(run.event_id)
    assert (reaction.workflow_id, reaction.instance_id, reaction.is_test) == (
        tested,
        run.instance_id,
        True,
    )
    event = await o.events.GetEvent(
        ev.GetEventRequest(id=run.event_id, project_id=tenant.project), metadata=o.md
    )
    assert (event.event.type, event.event.source) == (event_type, "eventflow/test-run")
    assert json.loads(event.event.data_json) == {"userId": "u-7", "amount": 3}
    [delivery] = [d for d in receiver.at("/tested") if d.body["id"] == run.event_id]
    assert delivery.verified and delivery.body["data"] == {"userId": "u-7", "amount": 3}
    assert not [d for d in receiver.at("/other") if d.body["id"] == run.event_id]
    others = await o.instances.ListInstances(
        inst.ListInstancesRequest(project_id=tenant.project, workflow_id=other), metadata=o.md
    )
    assert run.event_id not in {i.event_id for i in others.instances}

    # Re-entry is not applied to test runs, and they do not count toward it.
    again = await hot_run(tenant, tested, {"userId": "u-7"})
    assert again.instance_id != run.instance_id
    real = await send_structured(producer, tenant, event_type, {"userId": "u-7"})
    reactions = await o.settled(real, count=2)
    assert {r.workflow_id: r.is_test for r in reactions} == {tested: False, other: False}
    assert not (await dry_run(tenant, tested, {"userId": "u-7"})).reentry.allowed


async def test_a_hot_run_of_the_draft_runs_the_draft_as_version_0(tenant: Tenant) -> None:
    approved = await approved_echo(tenant)
    workflow_id = await create_draft(tenant, trigger(), [action("score", approved)])
    await until(
        lambda: dry_run(tenant, workflow_id, {}, draft=True),
        lambda r: r.would_run,
        "the draft and the approval to arrive",
    )
    run = await hot_run(tenant, workflow_id, {"orderId": "o-5"}, draft=True)
    o = Orchestrated(tenant)
    done = await until(
        lambda: o.instances.GetInstance(inst.GetInstanceRequest(id=run.instance_id), metadata=o.md),
        lambda r: r.instance.status in ("completed", "failed"),
        "the draft's test instance to finish",
    )
    assert (done.instance.status, done.instance.workflow_version, done.instance.is_test) == (
        "completed",
        0,
        True,
    )
    [step] = (await o.reactions(run.event_id))[0].steps
    assert json.loads(step.output_json)["data"]["payload"] == {"orderId": "o-5"}


async def test_test_runs_are_tenant_scoped_need_a_developer_and_a_json_object(
    tenant: Tenant, channel: grpc.aio.Channel, operator_token: str, database_url: str
) -> None:
    workflow_id, _ = await create_and_publish(
        tenant, trigger(), [wf.Step(type="delay", duration_ms=1000)]
    )
    await until(lambda: dry_run(tenant, workflow_id, {}), lambda r: True, "the workflow")
    intruder = await make_tenant(channel, operator_token)
    for call in (dry_run(intruder, workflow_id, {}), hot_run(intruder, workflow_id, {})):
        error = await rpc_error(call)
        assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
    error = await rpc_error(dry_run(tenant, workflow_id, {}, role="viewer"))
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_TOO_LOW")

    before = await footprint(database_url, tenant.org)
    too_big = json.dumps({"blob": "x" * (1024 * 1024)})
    for bad in ("[1, 2]", '{"a": ', '{"a": NaN}', too_big):
        for call in (dry_run(tenant, workflow_id, bad), hot_run(tenant, workflow_id, bad)):
            error = await rpc_error(call)
            assert error.code == grpc.StatusCode.INVALID_ARGUMENT, bad[:20]
            assert [v.field for v in error.violations] == ["payload_json"]
    error = await rpc_error(dry_run(tenant, "not-a-uuid", {}))
    assert [v.field for v in error.violations] == ["workflow_id"]
    assert await footprint(database_url, tenant.org) == before


async def test_a_sandbox_workflow_needs_a_plan_with_a_sandbox(
    tenant: Tenant, operator_token: str
) -> None:
    workflow_id, _ = await create_and_publish(
        tenant, trigger(), [wf.Step(type="delay", duration_ms=1000)], environment="sandbox"
    )
    plan = await until(lambda: dry_run(tenant, workflow_id, {}), lambda r: True, "the workflow")
    assert plan.environment == "sandbox" and plan.would_run
    await tenant.tenancy.UpdateOrganizationPlan(
        tenancy_api.UpdateOrganizationPlanRequest(id=tenant.org, plan="starter"),
        metadata=bearer(operator_token),
    )

    async def refused() -> bool:
        try:
            await dry_run(tenant, workflow_id, {})
        except grpc.aio.AioRpcError as error:
            return read_error(error).reason == "SANDBOX_DISABLED"
        return False

    await eventually(refused, "the plan change to reach the orchestrator")
    error = await rpc_error(hot_run(tenant, workflow_id, {}))
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SANDBOX_DISABLED")


async def test_what_a_hot_run_derives_is_a_test_too(
    tenant: Tenant, producer: AIOKafkaProducer
) -> None:
    derived_type = trigger()
    emitter = await approved(
        tenant, {"derived_event": {"type": derived_type, "payload": {"userId": "u-9"}}}
    )
    source_type = trigger()
    tested, _ = await create_and_publish(
        tenant, source_type, [wf.Step(type="custom_action", action=emitter)]
    )
    listener, _ = await create_and_publish(
        tenant,
        derived_type,
        [wf.Step(type="custom_action", action=await approved_echo(tenant))],
        reentry=wf.Reentry(mode="once"),
    )
    o = Orchestrated(tenant)
    # No probe events: a real run of the source would derive a real event for u-9.
    await until(lambda: dry_run(tenant, listener, {}), lambda r: True, "the listener")
    run = await until(lambda: hot_run(tenant, tested, {}), lambda r: True, "the source")

    [reaction] = await o.settled(run.event_id)
    assert reaction.is_test and reaction.instance_status == "completed"
    derived_id = json.loads(reaction.steps[0].output_json)["derived_event_id"]
    [derived_reaction] = await o.settled(derived_id)
    assert derived_reaction.is_test and derived_reaction.instance_status == "completed"
    stored = await o.events.GetEvent(
        ev.GetEventRequest(id=derived_id, project_id=tenant.project), metadata=o.md
    )
    assert stored.event.is_test
    # Like the test run itself, what it derived does not count toward re-entry.
    assert (await dry_run(tenant, listener, {"userId": "u-9"})).reentry.allowed
    real = await send_structured(producer, tenant, derived_type, {"userId": "u-9"})
    [first_real] = await o.settled(real)
    assert not first_real.is_test
