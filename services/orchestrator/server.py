"""Assembles the orchestrator; used by `eventflow serve orchestrator` and the dev stack."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from eventflow.orchestrator.v1 import (
    event_service_pb2_grpc,
    instance_service_pb2_grpc,
    projection_service_pb2_grpc,
    sandbox_service_pb2_grpc,
    test_run_service_pb2_grpc,
)
from psycopg_pool import AsyncConnectionPool

from libs.bus import Bus, Subscription
from libs.bus import topics as bus_topics
from libs.db import load_migrations
from libs.outbox import OutboxRelay
from libs.server import ServiceBinding
from services.orchestrator.api.events import EventServicer
from services.orchestrator.api.instances import DeadLetterServicer, InstanceServicer
from services.orchestrator.api.projections import ProjectionServicer
from services.orchestrator.api.sandbox import SandboxServicer
from services.orchestrator.api.test_runs import TestRunServicer
from services.orchestrator.control import Control
from services.orchestrator.dlq import DeadLetterQueue
from services.orchestrator.dlq_depth import DeadLetterDepth
from services.orchestrator.events.ingest import Ingest
from services.orchestrator.events.registry_feeds import RegistryFeeds
from services.orchestrator.projections import Projections
from services.orchestrator.publishing import Publisher
from services.orchestrator.reads import Reads
from services.orchestrator.replay import Replays
from services.orchestrator.runner.steps import Executor, SigningSecrets, StepRunner, Webhooks
from services.orchestrator.runner.worker import Worker
from services.orchestrator.sandbox import Sandbox
from services.orchestrator.step_plan import ActionResolver, StepPlanner
from services.orchestrator.storage import SCHEMA
from services.orchestrator.test_runs import TestRuns
from services.orchestrator.webhooks.egress import DEFAULT_POLICY, EgressPolicy

MIGRATIONS = load_migrations(Path(__file__).parent / "storage" / "migrations")
INGEST_GROUP = "orchestrator-ingest"
EVENT_PARTITIONS = 4

__all__ = ["MIGRATIONS", "SCHEMA", "Orchestrator", "build_orchestrator"]


@dataclass
class Orchestrator:
    bindings: list[ServiceBinding]
    ingest: Ingest
    worker: Worker
    feeds: RegistryFeeds
    relay: OutboxRelay
    bus: Bus
    dlq_depth: DeadLetterDepth
    _ingest_subscription: Subscription | None = None

    async def start(self) -> None:
        # Replicas share ingest by partition; the key keeps one subject in order.
        await self.bus.ensure_topic(bus_topics.EVENTS, partitions=EVENT_PARTITIONS)
        for topic in (bus_topics.EVENTS_INVALID, bus_topics.EVENTS_DLQ):
            await self.bus.ensure_topic(topic)
        for topic in (bus_topics.REGISTRY_WORKFLOWS, bus_topics.REGISTRY_TENANTS):
            await self.bus.ensure_topic(topic, compacted=True)
        self.relay.start()
        self.feeds.start()
        self.dlq_depth.start()
        await self.worker.start()
        self._ingest_subscription = self.bus.subscribe(
            [bus_topics.EVENTS], INGEST_GROUP, self.ingest.handle
        )

    async def stop(self) -> None:
        if self._ingest_subscription is not None:
            await self._ingest_subscription.stop()
        await self.worker.stop()
        await self.feeds.stop()
        await self.relay.stop()
        await self.dlq_depth.stop()


class ExecutorCalls(Executor, ActionResolver, Protocol):
    """The executor as the orchestrator uses it: run a step, or say what would run."""


def build_orchestrator(
    pool: AsyncConnectionPool,
    bus: Bus,
    executor: ExecutorCalls,
    webhooks: Webhooks,
    signing_secrets: SigningSecrets,
    *,
    concurrency: int = 64,
    outbox_poll_ms: int = 500,
    egress: EgressPolicy = DEFAULT_POLICY,
) -> Orchestrator:
    worker = Worker(pool, StepRunner(executor, webhooks, signing_secrets), concurrency=concurrency)
    reads = Reads(pool)
    bindings = [
        ServiceBinding(
            "eventflow.orchestrator.v1.EventService",
            EventServicer(Publisher(pool, bus), reads, Replays(pool, worker.notify)),
            event_service_pb2_grpc.add_EventServiceServicer_to_server,
        ),
        ServiceBinding(
            "eventflow.orchestrator.v1.InstanceService",
            InstanceServicer(reads, Control(pool, worker.notify)),
            instance_service_pb2_grpc.add_InstanceServiceServicer_to_server,
        ),
        ServiceBinding(
            "eventflow.orchestrator.v1.DeadLetterService",
            DeadLetterServicer(DeadLetterQueue(pool, worker.notify)),
            instance_service_pb2_grpc.add_DeadLetterServiceServicer_to_server,
        ),
        ServiceBinding(
            "eventflow.orchestrator.v1.SandboxService",
            SandboxServicer(Sandbox(pool)),
            sandbox_service_pb2_grpc.add_SandboxServiceServicer_to_server,
        ),
        ServiceBinding(
            "eventflow.orchestrator.v1.ProjectionService",
            ProjectionServicer(Projections(pool)),
            projection_service_pb2_grpc.add_ProjectionServiceServicer_to_server,
        ),
        ServiceBinding(
            "eventflow.orchestrator.v1.TestRunService",
            TestRunServicer(TestRuns(pool, StepPlanner(executor, egress), worker.notify)),
            test_run_service_pb2_grpc.add_TestRunServiceServicer_to_server,
        ),
    ]
    relay = OutboxRelay(pool, SCHEMA, bus, poll_interval_s=outbox_poll_ms / 1000)
    return Orchestrator(
        bindings,
        Ingest(pool, worker),
        worker,
        RegistryFeeds(pool, bus),
        relay,
        bus,
        # One per process: a second would register the same gauge twice.
        DeadLetterDepth(pool),
    )
