"""Projections and derived events, written with the step result (SPEC §6, §7)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
from aiokafka import AIOKafkaProducer
from eventflow.registry.v1 import workflow_pb2 as wf

from tests.conftest import Tenant
from tests.governance.conftest import ActionsClient
from tests.governance.modules import constant, wasm
from tests.orchestrator.conftest import (
    Orchestrated,
    create_and_publish,
    eventually,
    send_structured,
    workflow_is_live,
)
from tests.orchestrator.test_end_to_end import trigger


async def approved(tenant: Tenant, document: dict[str, Any]) -> str:
    actions = ActionsClient(tenant)
    name = f"fx-{uuid.uuid4().hex[:6]}"
    await actions.upload(name, wasm(constant(document)))
    await actions.review(name, 1)
    return name


async def rows(database_url: str, tenant: Tenant, name: str) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT entity_type, entity_id, status, data FROM orchestrator.projections"
            " WHERE organization_id = %s AND name = %s ORDER BY create_time",
            (tenant.org, name),
        )
        return list(await cur.fetchall())


async def test_a_keyed_projection_is_upserted_and_an_unkeyed_one_appended(
    tenant: Tenant, producer: AIOKafkaProducer, database_url: str
) -> None:
    keyed = await approved(
        tenant,
        {
            "projection": {
                "name": "orders",
                "entity_type": "order",
                "entity_id": 7,
                "status": "ok",
                "data": {"n": 1},
            }
        },
    )
    appended = await approved(tenant, {"projection": {"name": "audit", "data": {"seen": True}}})
    event_type = trigger()
    await create_and_publish(
        tenant,
        event_type,
        [
            wf.Step(type="custom_action", action=keyed),
            wf.Step(type="custom_action", action=appended),
        ],
    )
    o = Orchestrated(tenant)
    await workflow_is_live(o, event_type, producer)
    for _ in range(2):
        event_id = await send_structured(producer, tenant, event_type, {})
        [reaction] = await o.settled(event_id)
        assert reaction.instance_status == "completed"
    assert await rows(database_url, tenant, "orders") == [("order", "7", "ok", {"n": 1})]
    # One audit row per completed instance, the probe's included: appended, never merged.
    audit = await rows(database_url, tenant, "audit")
    assert len(audit) >= 3 and all(r == (None, None, "", {"seen": True}) for r in audit)


async def test_a_derived_event_carries_causation_and_starts_its_own_workflows(
    tenant: Tenant, producer: AIOKafkaProducer
) -> None:
    derived_type = trigger()
    emitter = await approved(
        tenant, {"derived_event": {"type": derived_type, "payload": {"from": "parent"}}}
    )
    echo_type = trigger()
    await create_and_publish(tenant, echo_type, [wf.Step(type="custom_action", action=emitter)])
    listener = await approved(tenant, {"ok": True})
    await create_and_publish(tenant, derived_type, [wf.Step(type="custom_action", action=listener)])
    o = Orchestrated(tenant)
    await workflow_is_live(o, echo_type, producer)
    await workflow_is_live(o, derived_type, producer)
    parent = await send_structured(producer, tenant, echo_type, {"userId": "u-9"})
    [reaction] = await o.settled(parent)
    output = json.loads(reaction.steps[0].output_json)
    child_id = output["derived_event_id"]

    async def child_done() -> bool:
        found = await o.reactions(child_id)
        return bool(found) and found[0].instance_status == "completed"

    await eventually(child_done, "the derived event's workflow")
    from eventflow.orchestrator.v1 import event_service_pb2 as ev

    child = await o.events.GetEvent(
        ev.GetEventRequest(id=child_id, project_id=tenant.project), metadata=o.md
    )
    assert (child.event.causation_id, child.event.correlation_id, child.event.depth) == (
        parent,
        parent,
        1,
    )
    assert json.loads(child.event.data_json) == {"from": "parent"}


async def test_a_derived_event_loop_is_stopped_into_the_dlq(
    tenant: Tenant, producer: AIOKafkaProducer
) -> None:
    from eventflow.orchestrator.v1 import instance_service_pb2 as inst

    loop_type = trigger()
    looper = await approved(tenant, {"derived_event": {"type": loop_type, "payload": {}}})
    workflow_id, _ = await create_and_publish(
        tenant, loop_type, [wf.Step(type="custom_action", action=looper)]
    )
    o = Orchestrated(tenant)

    async def stopped() -> bool:
        await send_structured(producer, tenant, loop_type, {})
        letters = await o.dead_letters.ListDeadLetters(
            inst.ListDeadLettersRequest(workflow_id=workflow_id, project_id=tenant.project),
            metadata=o.md,
        )
        return any(d.reason == "DERIVED_EVENT_DEPTH" for d in letters.dead_letters)

    await eventually(stopped, "the chain to be stopped at depth 8", timeout_s=60)
