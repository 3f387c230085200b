"""eventflow's side of the side-by-side benchmark: the same job and phases as the peers.

The stack runs in processes of its own (bench/eventflow_server.py: the platform services and
the orchestrator, as deployed) on the benchmark's PostgreSQL and Kafka broker,
settings at their defaults. A tenant uploads the reference action
`order-risk-scorer` (examples/actions, built from source) and a second admin approves it;
two projects each publish a workflow triggered by ``orders.created``: one custom_action
step, or the action three times. Each step's output upserts the ``order_risk`` projection
keyed by order id, in the step result's transaction.

An event is accepted when the broker acknowledges it (structured CloudEvent, id = order id,
produced with the bus's settings: idempotent, acks=all); a run is complete when its
instance is, read from the orchestrator's table (``update_time`` of the transaction that
completed it).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
import psycopg
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from eventflow.registry.v1 import tenancy_service_pb2 as tn
from eventflow.registry.v1 import tenancy_service_pb2_grpc as tn_grpc
from eventflow.registry.v1 import workflow_pb2 as wf
from eventflow.registry.v1 import workflow_service_pb2 as wf_api
from eventflow.registry.v1 import workflow_service_pb2_grpc as wf_grpc

from bench import e2e_bench
from bench.eventflow_server import REPLICAS_ENV
from bench.peers import peer
from bench.peers.apps import job, offer
from libs.bus import topics as bus_topics
from libs.identity import create_dev_pki
from services.orchestrator.server import INGEST_GROUP

ROOT = Path(__file__).resolve().parents[1]
ORG = e2e_bench.ORG
STRUCTURED = e2e_bench.STRUCTURED
LIVE_TIMEOUT_S = 90
# The ingest group must hold still this long (past a heartbeat, 3 s) before measuring.
SETTLED_FOR_S = 4.0


def event(project: str, key: str) -> bytes:
    value = {
        "specversion": "1.0",
        "id": key,
        "source": "bench",
        "type": job.EVENT_TYPE,
        "orgid": ORG,
        "projectid": project,
        "datacontenttype": "application/json",
        "data": job.order(key),
    }
    return json.dumps(value, separators=(",", ":")).encode()


def project(steps: int) -> str:
    return f"orders-{steps}step"


class Eventflow(offer.System):
    def __init__(self, producer: AIOKafkaProducer, topic: str, database_url: str) -> None:
        self.producer = producer
        self.topic = topic
        self.database_url = database_url
        self._conn: psycopg.AsyncConnection[Any] | None = None

    async def _db(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None:
            self._conn = await psycopg.AsyncConnection.connect(self.database_url, autocommit=True)
        return self._conn

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()

    async def submit(self, steps: int, key: str) -> None:
        value = event(project(steps), key)
        await (await self.producer.send(self.topic, value=value, headers=STRUCTURED))

    async def finished(self, steps: int, prefix: str, count: int) -> tuple[int, int]:
        cur = await (await self._db()).execute(
            "SELECT count(*) FILTER (WHERE status = 'completed'),"
            " count(*) FILTER (WHERE status IN ('failed', 'canceled'))"
            " FROM orchestrator.instances WHERE project_id = %s AND event_id LIKE %s",
            (project(steps), f"{prefix}-%"),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    async def completions(self, steps: int, prefix: str) -> dict[str, float]:
        cur = await (await self._db()).execute(
            "SELECT event_id, extract(epoch FROM update_time)::float8"
            " FROM orchestrator.instances WHERE project_id = %s AND event_id LIKE %s"
            " AND status = 'completed'",
            (project(steps), f"{prefix}-%"),
        )
        return {str(key): float(at) for key, at in await cur.fetchall()}

    async def until_live(self, steps: int, name: str) -> None:
        """The orchestrator learns of a published workflow over Kafka: offer one event at a
        time until one starts an instance."""
        deadline = time.monotonic() + LIVE_TIMEOUT_S
        for n in range(10**6):
            await self.submit(steps, f"{name}-{steps}step-live-{n:06d}")
            await asyncio.sleep(0.5)
            done, failed = await self.finished(steps, f"{name}-{steps}step-live", 1)
            if done or failed:
                return
            if time.monotonic() > deadline:
                break
        raise peer.PeerFailed(f"the {steps}-step workflow never started an instance")


async def _setup(address: str, operator: str, shapes: list[int]) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        uploader, reviewer = await e2e_bench.create_tenant(channel, operator)
        await e2e_bench.upload_approved_action(channel, uploader, reviewer)
        tenancy = tn_grpc.TenancyServiceStub(channel)
        workflows = wf_grpc.WorkflowServiceStub(channel)
        op = (("authorization", f"Bearer {operator}"),)
        for steps in shapes:
            await tenancy.CreateProject(
                tn.CreateProjectRequest(organization_id=ORG, project=tn.Project(id=project(steps))),
                metadata=op,
            )
            created = await workflows.CreateWorkflow(
                wf_api.CreateWorkflowRequest(
                    project_id=project(steps),
                    workflow=wf.Workflow(
                        name=f"order scoring, {steps} step(s)",
                        trigger_event=job.EVENT_TYPE,
                        steps=[
                            wf.Step(
                                type="custom_action", name=f"score {i + 1}", action=e2e_bench.ACTION
                            )
                            for i in range(steps)
                        ],
                    ),
                ),
                metadata=uploader,
            )
            await workflows.PublishWorkflow(
                wf_api.PublishWorkflowRequest(id=created.workflow.id), metadata=uploader
            )


def _count_rows(database_url: str, phases: dict[str, Any]) -> None:
    """Per phase: the order_risk projections that exist with the score the job computes."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        for phase in phases.values():
            row = conn.execute(
                "SELECT count(*) FROM orchestrator.projections WHERE name = 'order_risk'"
                " AND entity_type = 'order' AND entity_id LIKE %s"
                " AND (data->>'score')::int = 0",
                (f"{phase['prefix']}-%",),
            ).fetchone()
            phase["rows"] = int(row[0]) if row else 0


async def ingest_group_settled(kafka: str, namespace: str, members: int) -> None:
    """Wait until every orchestrator replica has joined the ingest consumer group and the
    group has stopped rebalancing. Replicas join after they serve, and each join (and the
    leader's rejoin once it sees the topic's partitions) pauses ingest for up to a
    heartbeat, which the measurement must not catch."""
    group = f"{namespace}.{INGEST_GROUP}"
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka)
    await admin.start()
    try:
        deadline = time.monotonic() + LIVE_TIMEOUT_S
        steady_since: float | None = None
        while time.monotonic() < deadline:
            [response] = await admin.describe_consumer_groups([group])
            _, _, state, _, _, joined, *_ = response.groups[0]
            if state == "Stable" and len(joined) == members:
                steady_since = steady_since or time.monotonic()
                if time.monotonic() - steady_since >= SETTLED_FOR_S:
                    return
            else:
                steady_since = None
            await asyncio.sleep(0.5)
    finally:
        await admin.close()
    raise peer.PeerFailed(f"the ingest group never settled with {members} member(s)")


def _start_server(
    bench: peer.Bench, database_url: str, kafka: str, namespace: str, operator: str
) -> peer.Process:
    env = {
        "EVENTFLOW_DATABASE_URL": database_url,
        "EVENTFLOW_BUS": "kafka",
        "EVENTFLOW_KAFKA_BOOTSTRAP": kafka,
        "EVENTFLOW_KAFKA_NAMESPACE": namespace,
        "EVENTFLOW_GRPC_LISTEN": "127.0.0.1:0",
        "EVENTFLOW_INTERNAL_LISTEN": "127.0.0.1:0",
        "EVENTFLOW_CERTS_DIR": str(create_dev_pki(bench.folder / "certs")),
        "EVENTFLOW_DATA_DIR": str(bench.folder / "data"),
        "EVENTFLOW_OPERATOR_TOKEN": operator,
        "EVENTFLOW_VAULT_KEYRING": f"1:{base64.b64encode(os.urandom(32)).decode()}",
        "EVENTFLOW_LOG_LEVEL": "WARNING",
    }
    return peer.Process.start(
        "eventflow-server",
        [sys.executable, "-m", "bench.eventflow_server"],
        bench.folder,
        env,
        ROOT,
    )


def _address(server: peer.Process) -> str:
    for line in server.log.read_text(errors="replace").splitlines():
        if line.startswith('{"address"'):
            return str(json.loads(line)["address"])
    raise peer.PeerFailed(f"eventflow never printed its address:\n{server.tail()}")


def versions() -> dict[str, str]:
    """The commit, marked ``+dirty`` when the code under measurement has local changes."""
    import subprocess

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, check=False)
        return done.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--", "libs", "services", "cli"):
        commit += "+dirty"
    return {"eventflow": commit}


class EventflowInstance:
    """eventflow's stack started afresh: its own database, Kafka namespace and tenant."""

    def __init__(
        self, bench: peer.Bench, index: int, kafka: str, kafka_pids: list[int], shapes: list[int]
    ) -> None:
        self.bench = bench
        self.folder = bench.folder / "eventflow" / str(index)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.database_url = bench.database(f"bench_eventflow_{index}")
        self.kafka = kafka
        self.kafka_pids = kafka_pids
        self.shapes = shapes
        self.namespace = f"bench{uuid.uuid4().hex[:8]}"
        self.server: peer.Process | None = None
        self.producer = AIOKafkaProducer(
            bootstrap_servers=kafka, enable_idempotence=True, acks="all", linger_ms=5
        )
        self.system = Eventflow(
            self.producer, f"{self.namespace}.{bus_topics.EVENTS}", self.database_url
        )

    async def start(self) -> None:
        operator = secrets.token_urlsafe(16)
        bench = peer.Bench(self.folder, self.bench.postgres_url, self.bench.plan)
        self.server = _start_server(bench, self.database_url, self.kafka, self.namespace, operator)
        await asyncio.to_thread(self.server.wait_for_line, '{"address"', 120)
        await _setup(_address(self.server), operator, self.shapes)
        await self.producer.start()
        for steps in self.shapes:
            await self.system.until_live(steps, "eventflow")
        replicas = int(os.environ.get(REPLICAS_ENV, "1"))
        await ingest_group_settled(self.kafka, self.namespace, max(replicas, 1))

    def pids(self) -> list[int]:
        return [self.server.pid] if self.server else []

    def dependency_pids(self) -> list[int]:
        return [*self.kafka_pids, *self.bench.postgres_pids()]

    async def drive(self, steps: int, phases: list[dict[str, Any]], warmup: int) -> dict[str, Any]:
        figures = await offer.run_phases(self.system, "eventflow", steps, phases, warmup)
        _count_rows(self.database_url, figures)
        return figures

    async def stop(self) -> None:
        await self.system.close()
        await self.producer.stop()
        if self.server is not None:
            await asyncio.to_thread(self.server.stop)


async def warm_broker(
    bench: peer.Bench, kafka: str, kafka_pids: list[int], rate: float, seconds: float
) -> dict[str, Any]:
    """Send ``seconds`` of one-step events at ``rate`` through a throwaway eventflow, then
    stop it: the instances measured afterwards start fresh, on a broker that has served
    this traffic. Generic produce/consume traffic did not do it: perf still showed the
    broker's C2 compiler threads taking 30-40% of the machine through the seconds of
    eventflow's first minute where the tail came from (consumer-group commits, fetch
    sessions over four partitions, eventflow's own producers). Returns the warm-up's
    figures."""
    instance = EventflowInstance(bench, 0, kafka, kafka_pids, [1])
    await instance.start()
    try:
        spec = {"count": int(rate * seconds), "rate": rate, "offer_s": None, "timeout_s": 30}
        return await offer.run_phase(instance.system, 1, "broker-warmup", spec)
    finally:
        await instance.stop()
