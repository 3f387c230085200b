"""Assembles governance; used by `eventflow serve governance` and the dev stack."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eventflow.governance.v1 import action_service_pb2_grpc, module_service_pb2_grpc
from psycopg_pool import AsyncConnectionPool

from libs.bus import Bus
from libs.bus import topics as bus_topics
from libs.db import load_migrations
from libs.outbox import OutboxRelay
from libs.server import ServiceBinding
from services.governance.actions import ActionCatalog, Sandbox
from services.governance.api.actions import ActionServicer
from services.governance.api.modules import ModuleServicer
from services.governance.events.workflow_usages import UsageTracker
from services.governance.storage import SCHEMA
from services.governance.storage.actions import ActionStore

MIGRATIONS = load_migrations(Path(__file__).parent / "storage" / "migrations")

__all__ = ["MIGRATIONS", "SCHEMA", "Governance", "build_governance"]


@dataclass
class Governance:
    bindings: list[ServiceBinding]
    catalog: ActionCatalog
    relay: OutboxRelay
    usages: UsageTracker
    bus: Bus

    async def start(self) -> None:
        await self.bus.ensure_topic(bus_topics.GOVERNANCE_ACTIONS, compacted=True)
        await self.bus.ensure_topic(bus_topics.REGISTRY_WORKFLOWS, compacted=True)
        self.relay.start()
        self.usages.start()

    async def stop(self) -> None:
        await self.usages.stop()
        await self.relay.stop()


def build_governance(
    pool: AsyncConnectionPool, bus: Bus, sandbox: Sandbox, outbox_poll_ms: int = 500
) -> Governance:
    store = ActionStore(pool)
    relay = OutboxRelay(pool, SCHEMA, bus, poll_interval_s=outbox_poll_ms / 1000)
    catalog = ActionCatalog(store, sandbox, on_commit=relay.notify)
    bindings = [
        ServiceBinding(
            "eventflow.governance.v1.ActionService",
            ActionServicer(catalog),
            action_service_pb2_grpc.add_ActionServiceServicer_to_server,
        ),
        ServiceBinding(
            "eventflow.governance.v1.ModuleService",
            ModuleServicer(store),
            module_service_pb2_grpc.add_ModuleServiceServicer_to_server,
        ),
    ]
    return Governance(bindings, catalog, relay, UsageTracker(pool, bus), bus)
