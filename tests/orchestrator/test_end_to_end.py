"""From a Kafka producer to a completed instance (SPEC §3, §7, §9)."""

from __future__ import annotations

import json
import uuid

from aiokafka import AIOKafkaProducer
from eventflow.registry.v1 import workflow_pb2 as wf

from tests.conftest import Tenant
from tests.governance.conftest import ActionsClient
from tests.governance.modules import ECHO, wasm
from tests.orchestrator.conftest import (
    Orchestrated,
    Receiver,
    create_and_publish,
    send_structured,
    workflow_is_live,
)


def trigger() -> str:
    return f"orders.created.{uuid.uuid4().hex[:6]}"


async def approved_echo(tenant: Tenant) -> str:
    actions = ActionsClient(tenant)
    name = f"echo-{uuid.uuid4().hex[:6]}"
    await actions.upload(name, wasm(ECHO))
    await actions.review(name, 1)
    return name


async def test_a_structured_event_runs_an_action_then_a_signed_webhook(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    action = await approved_echo(tenant)
    event_type = trigger()
    workflow_id, secret = await create_and_publish(
        tenant,
        event_type,
        [
            wf.Step(type="custom_action", name="score", action=action),
            wf.Step(type="webhook", name="notify", url=f"{receiver.url}/orders"),
        ],
    )
    receiver.secrets["/orders"] = secret
    o = Orchestrated(tenant)
    await workflow_is_live(o, event_type, producer)
    event_id = await send_structured(producer, tenant, event_type, {"orderId": "o-1", "amount": 10})
    [reaction] = await o.settled(event_id)
    assert reaction.instance_status == "completed", reaction
    assert reaction.workflow_id == workflow_id
    score, notify = reaction.steps
    assert (score.status, notify.status) == ("completed", "completed")
    assert json.loads(score.output_json)["data"]["payload"] == {"orderId": "o-1", "amount": 10}
    [delivery] = [d for d in receiver.at("/orders") if d.body["id"] == event_id]
    assert delivery.verified, "the standardwebhooks library must verify our signature"
    assert delivery.body["data"] == {"orderId": "o-1", "amount": 10}
    assert delivery.headers["webhook-id"] == delivery.headers["idempotency-key"]
    kinds = [(e.position, e.kind) for e in await o.log(reaction.instance_id)]
    assert kinds == [
        (1, "instance_created"),
        (2, "step_started"),
        (3, "step_completed"),
        (4, "step_started"),
        (5, "step_completed"),
        (6, "instance_completed"),
    ]
