"""Orchestrator fixtures: a webhook receiver, a Kafka producer, workflow helpers."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiokafka import AIOKafkaProducer
from eventflow.orchestrator.v1 import event_service_pb2 as ev
from eventflow.orchestrator.v1 import event_service_pb2_grpc as ev_grpc
from eventflow.orchestrator.v1 import instance_service_pb2 as inst
from eventflow.orchestrator.v1 import instance_service_pb2_grpc as inst_grpc
from eventflow.registry.v1 import workflow_pb2 as wf
from eventflow.registry.v1 import workflow_service_pb2 as wf_api
from standardwebhooks import Webhook

from libs.bus import topics as bus_topics
from tests.conftest import Tenant


@dataclass
class Delivery:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    verified: bool
    raw: bytes = b""


@dataclass
class Receiver:
    """A local webhook receiver; ``script[path]`` lists statuses to answer in order."""

    url: str
    secrets: dict[str, str] = field(default_factory=dict)  # path -> whsec_ secret
    script: dict[str, list[int]] = field(default_factory=dict)
    deliveries: list[Delivery] = field(default_factory=list)
    # Seconds to wait before answering, per path: a step that is still running.
    delays: dict[str, float] = field(default_factory=dict)

    def at(self, path: str) -> list[Delivery]:
        return [d for d in self.deliveries if d.path == path]

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        secret = self.secrets.get(request.path)
        verified = False
        if secret:
            try:
                Webhook(secret).verify(raw, headers)
                verified = True
            except Exception:
                verified = False
        self.deliveries.append(Delivery(request.path, headers, json.loads(raw), verified, raw))
        await asyncio.sleep(self.delays.get(request.path, 0))
        statuses = self.script.get(request.path, [])
        status = statuses.pop(0) if statuses else 200
        retry_after = {"retry-after": "1"} if status == 503 else {}
        return web.Response(status=status, headers=retry_after)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    holder: list[Receiver] = []

    async def handle(request: web.Request) -> web.Response:
        return await holder[0].handle(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    holder.append(Receiver(f"http://127.0.0.1:{port}"))
    yield holder[0]
    await runner.cleanup()


@pytest.fixture
async def producer(kafka_bootstrap: str) -> AsyncIterator[AIOKafkaProducer]:
    kafka = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, enable_idempotence=True, max_request_size=2 * 1024 * 1024
    )
    await kafka.start()
    yield kafka
    await kafka.stop()


def structured(tenant: Tenant, event_type: str, data: dict[str, Any], **attrs: Any) -> bytes:
    event = {
        "specversion": "1.0",
        "id": attrs.pop("id", str(uuid.uuid4())),
        "source": "tests",
        "type": event_type,
        "orgid": tenant.org,
        "projectid": tenant.project,
        "datacontenttype": "application/json",
        "data": data,
        **attrs,
    }
    return json.dumps(event).encode()


async def send_structured(
    producer: AIOKafkaProducer, tenant: Tenant, event_type: str, data: dict[str, Any], **attrs: Any
) -> str:
    value = structured(tenant, event_type, data, **attrs)
    await producer.send_and_wait(
        bus_topics.EVENTS,
        value=value,
        headers=[("content-type", b"application/cloudevents+json")],
    )
    return str(json.loads(value)["id"])


async def create_and_publish(
    tenant: Tenant, trigger: str, steps: list[wf.Step], **kw: Any
) -> tuple[str, str]:
    """(workflow id, its webhook signing secret)."""
    created = await tenant.workflows.CreateWorkflow(
        wf_api.CreateWorkflowRequest(
            project_id=tenant.project,
            workflow=wf.Workflow(name=f"wf {trigger}", trigger_event=trigger, steps=steps, **kw),
        ),
        metadata=tenant.metadata("developer"),
    )
    workflow_id = created.workflow.id
    await tenant.workflows.PublishWorkflow(
        wf_api.PublishWorkflowRequest(id=workflow_id), metadata=tenant.metadata("developer")
    )
    return workflow_id, created.webhook_signing_secret


class Orchestrated:
    """Read side of the orchestrator for one tenant."""

    def __init__(self, tenant: Tenant) -> None:
        self.tenant = tenant
        self.events = ev_grpc.EventServiceStub(tenant.channel)
        self.instances = inst_grpc.InstanceServiceStub(tenant.channel)
        self.dead_letters = inst_grpc.DeadLetterServiceStub(tenant.channel)
        self.md = tenant.metadata("developer")

    async def reactions(self, event_id: str, env: str = "") -> list[Any]:
        try:
            found = await self.events.ListEventReactions(
                ev.ListEventReactionsRequest(
                    event_id=event_id, project_id=self.tenant.project, environment=env
                ),
                metadata=self.md,
            )
        except Exception:
            return []
        return list(found.reactions)

    async def settled(
        self,
        event_id: str,
        count: int = 1,
        statuses: tuple[str, ...] = ("completed", "failed"),
        timeout_s: float = 30.0,
    ) -> list[Any]:
        """Wait until the event has ``count`` reactions, all in one of ``statuses``."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            reactions = await self.reactions(event_id)
            if len(reactions) >= count and all(r.instance_status in statuses for r in reactions):
                return reactions
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"event {event_id}: reactions {reactions}")
            await asyncio.sleep(0.1)

    async def log(self, instance_id: str) -> list[Any]:
        found = await self.instances.ListInstanceLog(
            inst.ListInstanceLogRequest(instance_id=instance_id), metadata=self.md
        )
        return list(found.entries)


async def eventually(
    check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 30
) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def workflow_is_live(o: Orchestrated, trigger: str, producer: AIOKafkaProducer) -> None:
    """The orchestrator learns workflows over Kafka: wait until a probe event starts one."""

    async def probe() -> bool:
        event_id = await send_structured(producer, o.tenant, trigger, {"probe": True})
        await asyncio.sleep(0.3)
        return bool(await o.reactions(event_id))

    await eventually(probe, f"workflow for {trigger} to be live")
