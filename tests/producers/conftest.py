"""The example producers run as a user would run them, against the session's broker and stack."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from aiohttp import web
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from eventflow.registry.v1 import workflow_pb2 as wf

from libs.bus import topics as bus_topics
from tests.conftest import Tenant, make_tenant
from tests.harness.example_programs import PYTHON_PRODUCER, go_producer
from tests.orchestrator.conftest import Orchestrated, Receiver, create_and_publish, workflow_is_live

PRODUCER_TIMEOUT_S = 60
PATH = "/events"


@dataclass(frozen=True)
class Sent:
    """What a producer printed: the event id and where its record landed."""

    id: str
    key: str
    partition: int
    offset: int


@dataclass(frozen=True)
class ExampleProducer:
    language: str
    command: tuple[str, ...]
    bootstrap: str

    @property
    def source(self) -> str:
        """The CloudEvents source each example sends by default."""
        return f"examples/producers/{self.language}"

    async def send(self, **flags: str) -> Sent:
        """Run the example once with ``--name value`` flags (Go's flag package takes both
        one and two dashes); it exits 0 only once the broker has acknowledged the record."""
        args = [*self.command, "--brokers", self.bootstrap]
        for name, value in flags.items():
            args += [f"--{name}", value]
        proc = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), PRODUCER_TIMEOUT_S)
        assert proc.returncode == 0, f"{self.language} producer exited {proc.returncode}: {err!r}"
        return Sent(**json.loads(out.decode().strip().splitlines()[-1]))


@pytest.fixture(params=["python", "go"])
async def example_producer(request: pytest.FixtureRequest, kafka_bootstrap: str) -> ExampleProducer:
    if request.param == "python":
        command: tuple[str, ...] = (sys.executable, str(PYTHON_PRODUCER))
    else:
        # In a thread: the stack shares this event loop and must keep serving meanwhile.
        command = (str(await asyncio.to_thread(go_producer)),)
    return ExampleProducer(request.param, command, kafka_bootstrap)


@dataclass
class Live:
    """One tenant with a published workflow whose webhook step reaches ``receiver``."""

    tenant: Tenant
    event_type: str
    receiver: Receiver
    orchestrated: Orchestrated

    def deliveries_of(self, event_id: str) -> list[Any]:
        return [d for d in self.receiver.at(PATH) if d.body["id"] == event_id]


@pytest.fixture(scope="module")
async def live(
    channel: grpc.aio.Channel, operator_token: str, kafka_bootstrap: str
) -> AsyncIterator[Live]:
    tenant = await make_tenant(channel, operator_token)
    async with local_receiver() as receiver:
        event_type = f"producers.tested.{uuid.uuid4().hex[:6]}"
        step = wf.Step(type="webhook", name="notify", url=f"{receiver.url}{PATH}")
        _, secret = await create_and_publish(tenant, event_type, [step])
        receiver.secrets[PATH] = secret
        orchestrated = Orchestrated(tenant)
        probe = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await probe.start()
        try:
            await workflow_is_live(orchestrated, event_type, probe)
        finally:
            await probe.stop()
        yield Live(tenant, event_type, receiver, orchestrated)


@contextlib.asynccontextmanager
async def local_receiver() -> AsyncIterator[Receiver]:
    """The orchestrator tests' webhook receiver (Python standardwebhooks), on 127.0.0.1."""
    holder: list[Receiver] = []

    async def handle(request: web.Request) -> web.Response:
        return await holder[0].handle(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        holder.append(Receiver(f"http://127.0.0.1:{port}"))
        yield holder[0]
    finally:
        await runner.cleanup()


async def record_at(bootstrap: str, topic: str, partition: int, offset: int) -> Any:
    """The record a producer reported writing, read back from the broker."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        where = TopicPartition(topic, partition)
        consumer.assign([where])
        consumer.seek(where, offset)
        return await asyncio.wait_for(consumer.getone(), 30)
    finally:
        await consumer.stop()


async def find_invalid(bootstrap: str, sent: Sent, timeout_s: float = 30) -> Any:
    """The `eventflow.events.invalid` copy of the record ``sent`` wrote, found by the
    `eventflow-source` header that names where ingest read it."""
    source = [bus_topics.EVENTS, sent.partition, sent.offset]
    consumer = AIOKafkaConsumer(
        bus_topics.EVENTS_INVALID,
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while asyncio.get_running_loop().time() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for record in records:
                    headers = dict(record.headers)
                    if json.loads(headers.get("eventflow-source", b"null")) == source:
                        return record
        raise AssertionError(f"no record from {source} on {bus_topics.EVENTS_INVALID}")
    finally:
        await consumer.stop()
