"""Replay (SPEC §8): actions run again, projections are rewritten in place,
webhooks stay silent unless an admin asks, derived events inherit the flag,
and re-entry does not block it."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import grpc
import psycopg
from aiokafka import AIOKafkaProducer
from eventflow.orchestrator.v1 import event_service_pb2 as ev
from eventflow.registry.v1 import workflow_pb2 as wf
from google.protobuf.timestamp_pb2 import Timestamp

from tests.conftest import Tenant
from tests.integration.helpers import rpc_error, violation_fields
from tests.orchestrator.conftest import (
    Orchestrated,
    Receiver,
    create_and_publish,
    eventually,
    send_structured,
    workflow_is_live,
)
from tests.orchestrator.test_effects import approved
from tests.orchestrator.test_end_to_end import trigger


async def projection_rows(database_url: str, tenant: Tenant, name: str) -> int:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM orchestrator.projections"
            " WHERE organization_id = %s AND name = %s",
            (tenant.org, name),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


async def scoring_workflow(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer, path: str, **kw: object
) -> tuple[str, str, Orchestrated]:
    """A keyed projection, an appended one, then a webhook."""
    name = f"p-{uuid.uuid4().hex[:6]}"
    keyed = await approved(
        tenant,
        {"projection": {"name": name, "entity_type": "order", "entity_id": "o-1", "data": {}}},
    )
    appended = await approved(tenant, {"projection": {"name": f"{name}-log", "data": {}}})
    event_type = trigger()
    await create_and_publish(
        tenant,
        event_type,
        [
            wf.Step(type="custom_action", action=keyed),
            wf.Step(type="custom_action", action=appended),
            wf.Step(type="webhook", url=f"{receiver.url}{path}"),
        ],
        **kw,
    )
    o = Orchestrated(tenant)
    await workflow_is_live(o, event_type, producer)
    return name, event_type, o


def calls(receiver: Receiver, path: str, event_id: str) -> int:
    return len([d for d in receiver.at(path) if d.body["id"] == event_id])


async def replay(o: Orchestrated, event_id: str, **kw: object) -> ev.ReplayEventResponse:
    metadata = kw.pop("metadata", o.md)
    return await o.events.ReplayEvent(
        ev.ReplayEventRequest(event_id=event_id, project_id=o.tenant.project, **kw),
        metadata=metadata,
    )


async def test_a_replay_reruns_actions_rewrites_projections_and_skips_webhooks(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer, database_url: str
) -> None:
    name, event_type, o = await scoring_workflow(tenant, receiver, producer, "/replay")
    event_id = await send_structured(producer, tenant, event_type, {"order": 1})
    await o.settled(event_id)
    keyed_before = await projection_rows(database_url, tenant, name)
    appended_before = await projection_rows(database_url, tenant, f"{name}-log")

    response = await replay(o, event_id)
    assert len(response.instance_ids) == 1
    reactions = await o.settled(event_id, count=2)
    [rerun] = [r for r in reactions if r.instance_id == response.instance_ids[0]]
    assert rerun.instance_status == "completed"
    assert [s.status for s in rerun.steps] == ["completed", "completed", "skipped"]
    assert "side effects suppressed" in rerun.steps[2].error
    assert calls(receiver, "/replay", event_id) == 1
    assert await projection_rows(database_url, tenant, name) == keyed_before
    assert await projection_rows(database_url, tenant, f"{name}-log") == appended_before


async def test_replay_with_side_effects_fires_webhooks_and_needs_admin(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    _, event_type, o = await scoring_workflow(tenant, receiver, producer, "/loud")
    event_id = await send_structured(producer, tenant, event_type, {})
    await o.settled(event_id)
    error = await rpc_error(replay(o, event_id, with_side_effects=True))
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_TOO_LOW")
    assert len(await o.reactions(event_id)) == 1

    await replay(o, event_id, with_side_effects=True, metadata=tenant.metadata("admin"))
    await o.settled(event_id, count=2)
    assert calls(receiver, "/loud", event_id) == 2


async def test_re_entry_does_not_block_a_replay(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    _, event_type, o = await scoring_workflow(
        tenant, receiver, producer, "/once", reentry=wf.Reentry(mode="once")
    )
    subject = f"u-{uuid.uuid4().hex[:6]}"
    first = await send_structured(producer, tenant, event_type, {"userId": subject})
    await o.settled(first)
    second = await send_structured(producer, tenant, event_type, {"userId": subject})

    await eventually(lambda: _stored(o, second), "the second event to be stored")
    assert await o.reactions(second) == []  # blocked by `once`
    await replay(o, first)
    [_, rerun] = await o.settled(first, count=2)
    assert rerun.instance_status == "completed"
    # A replay is not a new entry: the subject is still blocked for new events.
    third = await send_structured(producer, tenant, event_type, {"userId": subject})
    await eventually(lambda: _stored(o, third), "the third event to be stored")
    assert await o.reactions(third) == []


async def _stored(o: Orchestrated, event_id: str) -> bool:
    try:
        await o.events.GetEvent(
            ev.GetEventRequest(id=event_id, project_id=o.tenant.project), metadata=o.md
        )
        return True
    except grpc.aio.AioRpcError:
        return False


async def test_derived_events_of_a_replay_are_replays_too(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    derived_type = trigger()
    emitter = await approved(tenant, {"derived_event": {"type": derived_type, "payload": {}}})
    source_type = trigger()
    await create_and_publish(tenant, source_type, [wf.Step(type="custom_action", action=emitter)])
    await create_and_publish(
        tenant, derived_type, [wf.Step(type="webhook", url=f"{receiver.url}/derived")]
    )
    o = Orchestrated(tenant)
    await workflow_is_live(o, source_type, producer)
    event_id = await send_structured(producer, tenant, source_type, {})
    [original] = await o.settled(event_id)
    first_derived = json.loads(original.steps[0].output_json)["derived_event_id"]
    await o.settled(first_derived)
    assert calls(receiver, "/derived", first_derived) == 1

    response = await replay(o, event_id)
    [rerun] = [
        r for r in await o.settled(event_id, count=2) if r.instance_id in response.instance_ids
    ]
    derived_id = json.loads(rerun.steps[0].output_json)["derived_event_id"]
    assert derived_id != first_derived
    [reaction] = await o.settled(derived_id)
    stored = await o.events.GetEvent(
        ev.GetEventRequest(id=derived_id, project_id=tenant.project), metadata=o.md
    )
    assert stored.event.replay_skip_side_effects
    assert stored.event.causation_id == event_id
    assert reaction.steps[0].status == "skipped"
    assert calls(receiver, "/derived", derived_id) == 0


async def test_a_range_replay_streams_progress_and_counts(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    _, event_type, o = await scoring_workflow(tenant, receiver, producer, "/range")
    start = datetime.now(UTC)  # after the probe events workflow_is_live sent
    events = [await send_structured(producer, tenant, event_type, {"i": i}) for i in range(3)]
    for event_id in events:
        await o.settled(event_id)
    since = Timestamp()
    since.FromDatetime(start)

    updates = [
        u
        async for u in o.events.ReplayEvents(
            ev.ReplayEventsRequest(project_id=tenant.project, type=event_type, start_time=since),
            metadata=o.md,
        )
    ]
    assert updates[-1].done and not any(u.done for u in updates[:-1])
    final = updates[-1]
    assert final.matched == final.replayed == final.instances_started == 3
    assert len({u.replay_id for u in updates}) == 1
    for event_id in events:
        reactions = await o.settled(event_id, count=2)
        assert len(reactions) == 2
        assert calls(receiver, "/range", event_id) == 1


async def test_replay_requests_name_bad_input(tenant: Tenant) -> None:
    o = Orchestrated(tenant)
    error = await rpc_error(replay(o, ""))
    assert violation_fields(error) == ["event_id"]
    error = await rpc_error(replay(o, "no-such-event"))
    assert error.code == grpc.StatusCode.NOT_FOUND
    error = await rpc_error(replay(o, "x", environment="staging"))
    assert violation_fields(error) == ["environment"]

    async def drain(request: ev.ReplayEventsRequest) -> None:
        async for _ in o.events.ReplayEvents(request, metadata=o.md):
            pass

    error = await rpc_error(drain(ev.ReplayEventsRequest(project_id=tenant.project)))
    assert violation_fields(error) == ["type"]
    later, earlier = Timestamp(), Timestamp()
    later.FromDatetime(datetime.now(UTC))
    earlier.FromDatetime(datetime.now(UTC) - timedelta(hours=1))
    error = await rpc_error(
        drain(ev.ReplayEventsRequest(project_id=tenant.project, start_time=later, end_time=earlier))
    )
    assert violation_fields(error) == ["end_time"]
