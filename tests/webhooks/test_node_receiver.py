"""eventflow's webhooks verified by the npm `standardwebhooks` library, not by our code.

The receiver is examples/receivers/node run as a subprocess with Node on 127.0.0.1; it
logs one JSON line per request saying what the library made of it (docs/webhooks.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from eventflow.orchestrator.v1 import event_pb2
from eventflow.orchestrator.v1 import event_service_pb2 as ev
from eventflow.registry.v1 import workflow_pb2 as wf
from eventflow.registry.v1 import workflow_service_pb2 as wf_api
from google.protobuf.field_mask_pb2 import FieldMask

from services.orchestrator.webhooks.signing import new_secret, signature_headers
from tests.conftest import Tenant
from tests.harness.example_programs import node_receiver
from tests.orchestrator.conftest import Orchestrated, eventually

PATH = "/hooks/orders"
DOC = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"
START_TIMEOUT_S = 30


@dataclass
class NodeReceiver:
    url: str
    process: asyncio.subprocess.Process
    log: list[dict[str, Any]] = field(default_factory=list)

    async def logged(self, matches: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        async def seen() -> bool:
            return any(matches(entry) for entry in self.log)

        await eventually(seen, "the receiver to log the request")
        [entry] = [entry for entry in self.log if matches(entry)]
        return entry

    async def post(self, body: bytes, headers: dict[str, str]) -> int:
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{self.url}{PATH}", data=body, headers=headers) as response,
        ):
            return response.status


@contextlib.asynccontextmanager
async def running_receiver(secret: str) -> AsyncIterator[NodeReceiver]:
    folder = await asyncio.to_thread(node_receiver)  # npm ci on first use
    node = shutil.which("node")
    assert node is not None, "the Node receiver needs `node` on PATH"
    process = await asyncio.create_subprocess_exec(
        node,
        "receiver.mjs",
        cwd=folder,
        env={**os.environ, "WEBHOOK_SECRET": secret, "PORT": "0", "HOST": "127.0.0.1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        first = await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S)
        assert first, f"receiver exited: {await process.stderr.read()!r}"  # type: ignore[union-attr]
        receiver = NodeReceiver(json.loads(first)["listening"], process)
        reading = asyncio.create_task(_read_log(process.stdout, receiver.log))
        try:
            yield receiver
        finally:
            reading.cancel()
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 10)
            except TimeoutError:
                process.kill()
                await process.wait()


async def _read_log(stream: asyncio.StreamReader, log: list[dict[str, Any]]) -> None:
    while line := await stream.readline():
        log.append(json.loads(line))


def signed(secret: str, body: bytes, *, msg_id: str = "", at: int | None = None) -> dict[str, str]:
    """Headers as eventflow's delivery signs them (services/orchestrator/webhooks/signing)."""
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}_0"
    headers = signature_headers(secret, msg_id, int(time.time()) if at is None else at, body)
    return {**headers, "content-type": "application/json"}


def envelope(**data: Any) -> bytes:
    body = {"id": str(uuid.uuid4()), "type": "orders.created", "data": data, "step": 0}
    return json.dumps(body, separators=(",", ":")).encode()


async def test_eventflow_deliveries_verify_with_the_npm_standardwebhooks_library(
    tenant: Tenant,
) -> None:
    event_type = f"orders.created.{uuid.uuid4().hex[:6]}"
    md = tenant.metadata("developer")
    # The secret comes with the workflow and the URL with the receiver: create the draft,
    # start the receiver with its secret, then point the step at it and publish.
    created = await tenant.workflows.CreateWorkflow(
        wf_api.CreateWorkflowRequest(
            project_id=tenant.project,
            workflow=wf.Workflow(
                name="node receiver",
                trigger_event=event_type,
                steps=[wf.Step(type="webhook", url="http://127.0.0.1:9/not-yet")],
            ),
        ),
        metadata=md,
    )
    workflow_id = created.workflow.id
    async with running_receiver(created.webhook_signing_secret) as receiver:
        step = wf.Step(type="webhook", name="notify", url=f"{receiver.url}{PATH}")
        await tenant.workflows.UpdateWorkflow(
            wf_api.UpdateWorkflowRequest(
                workflow=wf.Workflow(id=workflow_id, steps=[step]),
                update_mask=FieldMask(paths=["steps"]),
            ),
            metadata=md,
        )
        await tenant.workflows.PublishWorkflow(
            wf_api.PublishWorkflowRequest(id=workflow_id), metadata=md
        )
        o = Orchestrated(tenant)
        await _workflow_is_live(o, event_type)

        data = {"orderId": "o-7", "amount": 120, "userId": "u-7"}
        published = await o.events.Publish(
            ev.PublishRequest(
                event=event_pb2.EventInput(
                    type=event_type,
                    project_id=tenant.project,
                    subject="o-7",
                    data_json=json.dumps(data),
                )
            ),
            metadata=md,
        )
        [reaction] = await o.settled(published.event_id)
        assert reaction.instance_status == "completed", reaction
        assert [(s.name, s.status) for s in reaction.steps] == [("notify", "completed")]
        entry = await receiver.logged(
            lambda e: e.get("envelope", {}).get("id") == published.event_id
        )
    assert entry["outcome"] == "accepted", entry
    assert entry["webhook_id"].startswith("msg_")
    body = entry["envelope"]
    assert (body["type"], body["subject"], body["data"]) == (event_type, "o-7", data)
    assert body["workflow"] == {"id": workflow_id, "version": 1} and body["step"] == 0
    assert body["instance"] == reaction.instance_id and body["environment"] == "production"
    documented = documented_body()
    assert body.keys() == documented.keys(), "docs/webhooks.md shows the body as sent"
    assert body["workflow"].keys() == documented["workflow"].keys()
    assert not [e for e in receiver.log if e.get("outcome") == "rejected"]


async def test_the_npm_library_rejects_a_tampered_body() -> None:
    secret = new_secret()
    body = envelope(orderId="o-1", amount=10)
    headers = signed(secret, body)
    tampered = body.replace(b'"amount":10', b'"amount":10000')
    async with running_receiver(secret) as receiver:
        assert await receiver.post(tampered, headers) == 400
        assert await receiver.post(body, headers) == 204, "the untampered body verifies"
    rejected, accepted = receiver.log
    assert rejected["outcome"] == "rejected"
    assert rejected["error"] == "No matching signature found"
    assert accepted["outcome"] == "accepted"
    assert accepted["envelope"]["data"] == {"orderId": "o-1", "amount": 10}


async def test_the_npm_library_rejects_another_secret_and_a_stale_timestamp() -> None:
    secret = new_secret()
    body = envelope(orderId="o-2")
    async with running_receiver(secret) as receiver:
        assert await receiver.post(body, signed(new_secret(), body)) == 400
        six_minutes_ago = int(time.time()) - 360
        assert await receiver.post(body, signed(secret, body, at=six_minutes_ago)) == 400
        assert await receiver.post(body, {"content-type": "application/json"}) == 400
    assert [(e["outcome"], e["error"]) for e in receiver.log] == [
        ("rejected", "No matching signature found"),
        ("rejected", "Message timestamp too old"),
        ("rejected", "Missing required headers"),
    ]


async def test_a_repeated_webhook_id_is_acknowledged_and_handled_once() -> None:
    secret = new_secret()
    body = envelope(orderId="o-3")
    msg_id = f"msg_{uuid.uuid4().hex}_0"
    async with running_receiver(secret) as receiver:
        assert await receiver.post(body, signed(secret, body, msg_id=msg_id)) == 204
        # A retry: same id, a new timestamp and so a new signature.
        assert (
            await receiver.post(body, signed(secret, body, msg_id=msg_id, at=int(time.time()) + 1))
            == 200
        )
    assert [e["outcome"] for e in receiver.log] == ["accepted", "duplicate"]


def documented_body() -> dict[str, Any]:
    """The example body in docs/webhooks.md (the JSON block after `<!-- webhook body -->`)."""
    text = DOC.read_text(encoding="utf-8")
    block = text.split("<!-- webhook body -->\n```json\n", 1)[1].split("```", 1)[0]
    body: dict[str, Any] = json.loads(block)
    return body


async def _workflow_is_live(o: Orchestrated, event_type: str) -> None:
    """The orchestrator learns of a publish over Kafka: probe until an event starts it."""

    async def probe() -> bool:
        published = await o.events.Publish(
            ev.PublishRequest(
                event=event_pb2.EventInput(
                    type=event_type, project_id=o.tenant.project, data_json='{"probe": true}'
                )
            ),
            metadata=o.md,
        )
        await asyncio.sleep(0.3)
        return bool(await o.reactions(published.event_id))

    await eventually(probe, f"workflow for {event_type} to be live")
