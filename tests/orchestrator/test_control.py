"""Pause, resume and cancel at every scope, and workflow disable (SPEC §7).

Each test drives real instances through the stack: a step still running
when the pause lands, timers that come due while paused, instances started
inside a held scope, and resume continuing from where each instance held.
"""

from __future__ import annotations

import asyncio
import uuid

import grpc
from aiokafka import AIOKafkaProducer
from eventflow.orchestrator.v1 import instance_service_pb2 as inst
from eventflow.registry.v1 import workflow_pb2 as wf
from eventflow.registry.v1 import workflow_service_pb2 as wf_api

from tests.conftest import Tenant, make_tenant
from tests.integration.helpers import rpc_error, violation_fields
from tests.orchestrator.conftest import (
    Orchestrated,
    Receiver,
    create_and_publish,
    eventually,
    send_structured,
    workflow_is_live,
)
from tests.orchestrator.test_end_to_end import trigger

# Long enough to pause an instance while its timer is pending.
TIMER_MS = 1500


async def delay_then_webhook(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer, path: str
) -> tuple[str, str, Orchestrated]:
    event_type = trigger()
    workflow_id, _ = await create_and_publish(
        tenant,
        event_type,
        [
            wf.Step(type="delay", duration_ms=TIMER_MS),
            wf.Step(type="webhook", url=f"{receiver.url}{path}"),
        ],
    )
    o = Orchestrated(tenant)
    await workflow_is_live(o, event_type, producer)
    return workflow_id, event_type, o


async def instance_of(o: Orchestrated, event_id: str) -> str:
    async def started() -> bool:
        return bool(await o.reactions(event_id))

    await eventually(started, f"an instance for {event_id}")
    [reaction] = await o.reactions(event_id)
    return str(reaction.instance_id)


async def status(o: Orchestrated, instance_id: str) -> str:
    found = await o.instances.GetInstance(inst.GetInstanceRequest(id=instance_id), metadata=o.md)
    return str(found.instance.status)


async def becomes(o: Orchestrated, instance_id: str, wanted: str) -> None:
    async def check() -> bool:
        return await status(o, instance_id) == wanted

    await eventually(check, f"instance {instance_id} to be {wanted}")


async def kinds(o: Orchestrated, instance_id: str) -> list[str]:
    return [e.kind for e in await o.log(instance_id)]


async def waiting_on_timer(o: Orchestrated, instance_id: str) -> None:
    async def check() -> bool:
        return "wait_created" in await kinds(o, instance_id)

    await eventually(check, f"{instance_id} to wait on its timer")


async def test_a_paused_instance_lets_its_timer_pass_and_continues_on_resume(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    _, event_type, o = await delay_then_webhook(tenant, receiver, producer, "/timer")
    event_id = await send_structured(producer, tenant, event_type, {})
    instance_id = await instance_of(o, event_id)
    await waiting_on_timer(o, instance_id)

    paused = await o.instances.PauseInstance(
        inst.PauseInstanceRequest(id=instance_id), metadata=o.md
    )
    assert paused.instance.status == "paused"
    # The timer comes due while paused: it waits.
    await asyncio.sleep(TIMER_MS / 1000 + 1.0)
    assert await status(o, instance_id) == "paused"
    assert not [d for d in receiver.at("/timer") if d.body["id"] == event_id]

    resumed = await o.instances.ResumeInstance(
        inst.ResumeInstanceRequest(id=instance_id), metadata=o.md
    )
    assert resumed.instance.status == "running"
    await becomes(o, instance_id, "completed")
    assert len([d for d in receiver.at("/timer") if d.body["id"] == event_id]) == 1
    log = await kinds(o, instance_id)
    assert (
        log.index("instance_paused") < log.index("instance_resumed") < log.index("wait_completed")
    )
    assert [e.position for e in await o.log(instance_id)] == list(range(1, len(log) + 1))


async def test_a_step_running_when_paused_finishes_and_the_next_waits(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    receiver.delays["/slow"] = 1.5
    event_type = trigger()
    await create_and_publish(
        tenant,
        event_type,
        [
            wf.Step(type="webhook", url=f"{receiver.url}/slow"),
            wf.Step(type="webhook", url=f"{receiver.url}/after"),
        ],
    )
    o = Orchestrated(tenant)
    await workflow_is_live(o, event_type, producer)
    event_id = await send_structured(producer, tenant, event_type, {"n": 1})
    instance_id = await instance_of(o, event_id)

    async def in_flight() -> bool:
        return any(d.body["id"] == event_id for d in receiver.at("/slow"))

    await eventually(in_flight, "the slow webhook to be called")
    await o.instances.PauseInstance(inst.PauseInstanceRequest(id=instance_id), metadata=o.md)

    async def first_step_done() -> bool:
        return "step_completed" in await kinds(o, instance_id)

    await eventually(first_step_done, "the running step to finish")
    await asyncio.sleep(1.0)
    assert await status(o, instance_id) == "paused"
    assert not [d for d in receiver.at("/after") if d.body["id"] == event_id]
    [reaction] = await o.reactions(event_id)
    assert [s.status for s in reaction.steps] == ["completed", "pending"]

    await o.instances.ResumeInstance(inst.ResumeInstanceRequest(id=instance_id), metadata=o.md)
    await becomes(o, instance_id, "completed")
    assert len([d for d in receiver.at("/slow") if d.body["id"] == event_id]) == 1
    assert len([d for d in receiver.at("/after") if d.body["id"] == event_id]) == 1


async def test_a_subject_pause_holds_that_subject_only_including_later_instances(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    _, event_type, o = await delay_then_webhook(tenant, receiver, producer, "/subject")
    held, free = f"u-{uuid.uuid4().hex[:6]}", f"u-{uuid.uuid4().hex[:6]}"
    first = await send_structured(producer, tenant, event_type, {"userId": held})
    other = await send_structured(producer, tenant, event_type, {"userId": free})
    first_id, other_id = await instance_of(o, first), await instance_of(o, other)

    response = await o.instances.PauseInstances(
        inst.PauseInstancesRequest(
            scope=inst.InstanceScope(project_id=tenant.project, subject=held)
        ),
        metadata=o.md,
    )
    assert response.paused == 1
    assert (response.hold.scope, response.hold.subject) == ("subject", held)
    later = await send_structured(producer, tenant, event_type, {"userId": held})
    later_id = await instance_of(o, later)

    await becomes(o, other_id, "completed")
    await becomes(o, later_id, "paused")  # held at its first step boundary
    assert await status(o, first_id) == "paused"
    holds = await o.instances.ListHolds(inst.ListHoldsRequest(), metadata=o.md)
    assert [(h.scope, h.subject) for h in holds.holds] == [("subject", held)]

    resumed = await o.instances.ResumeInstances(
        inst.ResumeInstancesRequest(
            scope=inst.InstanceScope(project_id=tenant.project, subject=held)
        ),
        metadata=o.md,
    )
    assert resumed.resumed == 2
    await becomes(o, first_id, "completed")
    await becomes(o, later_id, "completed")
    assert not (await o.instances.ListHolds(inst.ListHoldsRequest(), metadata=o.md)).holds


async def test_a_project_pause_holds_every_instance_and_resume_releases_them(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    _, event_type, o = await delay_then_webhook(tenant, receiver, producer, "/project")
    events = [await send_structured(producer, tenant, event_type, {"i": i}) for i in range(3)]
    ids = [await instance_of(o, e) for e in events]

    response = await o.instances.PauseInstances(
        inst.PauseInstancesRequest(scope=inst.InstanceScope(project_id=tenant.project)),
        metadata=o.md,
    )
    assert response.paused >= 3
    assert response.hold.scope == "project"
    await asyncio.sleep(TIMER_MS / 1000 + 0.5)
    assert [await status(o, i) for i in ids] == ["paused"] * 3
    error = await rpc_error(
        o.instances.ResumeInstance(inst.ResumeInstanceRequest(id=ids[0]), metadata=o.md)
    )
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "INSTANCE_HELD")

    await o.instances.ResumeInstances(
        inst.ResumeInstancesRequest(scope=inst.InstanceScope(project_id=tenant.project)),
        metadata=o.md,
    )
    for instance_id in ids:
        await becomes(o, instance_id, "completed")
    delivered = {d.body["id"] for d in receiver.at("/project")}
    assert set(events) <= delivered


async def test_an_organization_stop_needs_admin_and_spares_other_organizations(
    tenant: Tenant,
    receiver: Receiver,
    producer: AIOKafkaProducer,
    channel: grpc.aio.Channel,
    operator_token: str,
) -> None:
    other = await make_tenant(channel, operator_token)
    _, event_type, o = await delay_then_webhook(tenant, receiver, producer, "/org")
    _, other_type, o2 = await delay_then_webhook(other, receiver, producer, "/org-other")
    mine = await instance_of(o, await send_structured(producer, tenant, event_type, {}))
    theirs = await instance_of(o2, await send_structured(producer, other, other_type, {}))

    org_scope = inst.InstanceScope(organization=True)
    error = await rpc_error(
        o.instances.PauseInstances(inst.PauseInstancesRequest(scope=org_scope), metadata=o.md)
    )
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_TOO_LOW")
    admin = tenant.metadata("admin")
    stopped = await o.instances.PauseInstances(
        inst.PauseInstancesRequest(scope=org_scope), metadata=admin
    )
    assert stopped.paused >= 1 and stopped.hold.scope == "organization"
    await becomes(o2, theirs, "completed")
    await asyncio.sleep(TIMER_MS / 1000)
    assert await status(o, mine) == "paused"

    await o.instances.ResumeInstances(inst.ResumeInstancesRequest(scope=org_scope), metadata=admin)
    await becomes(o, mine, "completed")


async def test_cancel_is_terminal_and_its_timer_never_fires(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    _, event_type, o = await delay_then_webhook(tenant, receiver, producer, "/cancel")
    subject = f"u-{uuid.uuid4().hex[:6]}"
    one = await instance_of(o, await send_structured(producer, tenant, event_type, {}))
    scoped = [
        await instance_of(
            o, await send_structured(producer, tenant, event_type, {"userId": subject})
        )
        for _ in range(2)
    ]
    canceled = await o.instances.CancelInstance(inst.CancelInstanceRequest(id=one), metadata=o.md)
    assert canceled.instance.status == "canceled"
    many = await o.instances.CancelInstances(
        inst.CancelInstancesRequest(
            scope=inst.InstanceScope(project_id=tenant.project, subject=subject)
        ),
        metadata=o.md,
    )
    assert many.canceled == 2
    await asyncio.sleep(TIMER_MS / 1000 + 1.0)
    for instance_id in (one, *scoped):
        assert await status(o, instance_id) == "canceled"
        assert (await kinds(o, instance_id))[-1] == "instance_canceled"
    assert not receiver.at("/cancel")[1:]  # at most the probe's delivery

    for call in (
        o.instances.PauseInstance(inst.PauseInstanceRequest(id=one), metadata=o.md),
        o.instances.ResumeInstance(inst.ResumeInstanceRequest(id=one), metadata=o.md),
        o.instances.CancelInstance(inst.CancelInstanceRequest(id=one), metadata=o.md),
    ):
        error = await rpc_error(call)
        assert (error.code, error.reason) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "INSTANCE_TERMINAL",
        )


async def test_disabling_a_workflow_holds_its_runs_until_it_is_enabled(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    workflow_id, event_type, o = await delay_then_webhook(tenant, receiver, producer, "/disable")
    event_id = await send_structured(producer, tenant, event_type, {})
    instance_id = await instance_of(o, event_id)
    await waiting_on_timer(o, instance_id)
    await tenant.workflows.DisableWorkflow(
        wf_api.DisableWorkflowRequest(id=workflow_id), metadata=tenant.metadata("developer")
    )
    await becomes(o, instance_id, "paused")
    log = await o.log(instance_id)
    assert log[-1].kind == "instance_paused" and '"workflow"' in log[-1].detail_json
    assert not [d for d in receiver.at("/disable") if d.body["id"] == event_id]
    error = await rpc_error(
        o.instances.ResumeInstance(inst.ResumeInstanceRequest(id=instance_id), metadata=o.md)
    )
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_DISABLED")

    await tenant.workflows.EnableWorkflow(
        wf_api.EnableWorkflowRequest(id=workflow_id), metadata=tenant.metadata("developer")
    )
    await becomes(o, instance_id, "completed")
    assert len([d for d in receiver.at("/disable") if d.body["id"] == event_id]) == 1


async def test_control_calls_name_bad_input_and_hide_other_tenants(
    tenant: Tenant, producer: AIOKafkaProducer, channel: grpc.aio.Channel, operator_token: str
) -> None:
    o = Orchestrated(tenant)
    error = await rpc_error(
        o.instances.PauseInstance(inst.PauseInstanceRequest(id="nope"), metadata=o.md)
    )
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT and violation_fields(error) == ["id"]
    error = await rpc_error(
        o.instances.PauseInstances(
            inst.PauseInstancesRequest(scope=inst.InstanceScope(subject="u", organization=True)),
            metadata=tenant.metadata("admin"),
        )
    )
    assert violation_fields(error) == ["scope.subject"]
    error = await rpc_error(
        o.instances.PauseInstances(
            inst.PauseInstancesRequest(scope=inst.InstanceScope(project_id=tenant.project)),
            metadata=tenant.metadata("viewer"),
        )
    )
    assert error.code == grpc.StatusCode.PERMISSION_DENIED

    event_type = trigger()
    await create_and_publish(tenant, event_type, [wf.Step(type="delay", duration_ms=60_000)])
    await workflow_is_live(o, event_type, producer)
    instance_id = await instance_of(o, await send_structured(producer, tenant, event_type, {}))
    error = await rpc_error(
        o.instances.ResumeInstance(inst.ResumeInstanceRequest(id=instance_id), metadata=o.md)
    )
    assert (error.code, error.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "INSTANCE_NOT_PAUSED",
    )
    stranger = await make_tenant(channel, operator_token)
    error = await rpc_error(
        o.instances.PauseInstance(
            inst.PauseInstanceRequest(id=instance_id), metadata=stranger.metadata("admin")
        )
    )
    assert error.code == grpc.StatusCode.NOT_FOUND
    assert await status(o, instance_id) == "running"
