"""After a signing-secret rotation, deliveries verify with the new and the previous secret."""

from __future__ import annotations

from aiokafka import AIOKafkaProducer
from eventflow.registry.v1 import workflow_pb2 as wf
from eventflow.registry.v1 import workflow_service_pb2 as api
from standardwebhooks import Webhook

from tests.conftest import Tenant
from tests.orchestrator.conftest import (
    Orchestrated,
    Receiver,
    create_and_publish,
    send_structured,
    workflow_is_live,
)
from tests.orchestrator.test_end_to_end import trigger


async def test_a_rotated_workflow_signs_with_both_secrets_during_the_grace_period(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    event_type = trigger()
    workflow_id, previous = await create_and_publish(
        tenant, event_type, [wf.Step(type="webhook", url=f"{receiver.url}/rotated")]
    )
    # Before the first delivery, so no cached lookup predates the rotation.
    rotated = await tenant.workflows.RotateWebhookSigningSecret(
        api.RotateWebhookSigningSecretRequest(id=workflow_id),
        metadata=tenant.metadata("developer"),
    )
    current = rotated.webhook_signing_secret
    assert current != previous
    o = Orchestrated(tenant)
    await workflow_is_live(o, event_type, producer)
    event_id = await send_structured(producer, tenant, event_type, {"n": 1})
    await o.settled(event_id)
    [delivery] = [d for d in receiver.at("/rotated") if d.body["id"] == event_id]
    assert len(delivery.headers["webhook-signature"].split(" ")) == 2
    raw = delivery.raw
    for secret in (current, previous):
        Webhook(secret).verify(raw, delivery.headers)
