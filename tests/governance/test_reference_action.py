"""The reference action, built from source, through the whole platform:
uploaded and approved in governance, its secret stored in the vault, and
executed by the executor as the orchestrator would."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from eventflow.vault.v1 import secret_service_pb2 as vault_api
from eventflow.vault.v1 import secret_service_pb2_grpc as vault_grpc

from cli.stack import Stack
from tests.governance.conftest import ActionsClient
from tests.governance.test_execution import Orchestrator
from tests.harness.actions import order_risk_scorer

# Scores 75 by the README's formula: amount >= 1000 (+25), account 3 days
# old (+25), 12 units (+10), DE paid in USD (+15).
RISKY_ORDER = {
    "orderId": "o-1500",
    "amount": 1500,
    "currency": "USD",
    "country": "DE",
    "items": [{"sku": "A", "qty": 12, "price": 125.0}],
    "customer": {"id": "c-1", "email": "a@example.com", "accountAgeDays": 3},
}


async def test_the_reference_action_scores_projects_and_derives(
    actions: ActionsClient, stack: Stack, pki: Path
) -> None:
    module = await asyncio.to_thread(order_risk_scorer)
    name = "order-risk-scorer"
    uploaded = await actions.upload(name, module, permissions='["read_secret:RISK_THRESHOLD"]')
    await actions.review(name, uploaded.version.version)
    vault = vault_grpc.SecretServiceStub(actions.tenant.channel)
    await vault.SetSecret(
        vault_api.SetSecretRequest(action=name, key="RISK_THRESHOLD", value="80"),
        metadata=actions.md("developer"),
    )
    orchestrator = Orchestrator(stack, pki)
    payload = json.dumps(RISKY_ORDER)
    for _ in range(300):
        result = await orchestrator.run(actions.tenant.org, name, payload=payload)
        if result.failure_reason != "ACTION_NOT_APPROVED":
            break
        await asyncio.sleep(0.05)
    assert result.ok, result.failure_message
    # The vault's threshold (80) is above the score, so no event is derived.
    assert json.loads(result.output_json) == {"score": 75}
    projection = result.projection
    assert (projection.name, projection.entity_type, projection.entity_id) == (
        "order_risk",
        "order",
        "o-1500",
    )
    assert projection.keyed and projection.status == "ok"
    assert json.loads(projection.data_json)["threshold"] == 80
    assert not result.HasField("derived_event")

    await vault.SetSecret(
        vault_api.SetSecretRequest(action=name, key="RISK_THRESHOLD", value="70"),
        metadata=actions.md("developer"),
    )
    flagged = await orchestrator.run(actions.tenant.org, name, payload=payload)
    assert flagged.projection.status == "review"
    assert flagged.derived_event.type == "orders.risk_flagged"
    assert json.loads(flagged.derived_event.payload_json) == {"orderId": "o-1500", "score": 75}

    rejected = await orchestrator.run(actions.tenant.org, name, payload='{"amount": 10}')
    assert (rejected.ok, rejected.failure_reason) == (False, "REJECTED")
