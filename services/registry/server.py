"""Assembles the registry from its parts; used by `eventflow serve registry` and the dev stack."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eventflow.registry.v1 import (
    key_lookup_service_pb2_grpc,
    tenancy_service_pb2_grpc,
    webhook_secret_service_pb2_grpc,
    workflow_service_pb2_grpc,
)
from psycopg_pool import AsyncConnectionPool

from libs.bus import Bus
from libs.bus import topics as bus_topics
from libs.db import load_migrations
from libs.outbox import OutboxRelay
from libs.server import ServiceBinding
from services.registry.api.key_lookup import ApiKeyLookupServicer
from services.registry.api.tenancy import TenancyServicer
from services.registry.api.webhook_secrets import WebhookSecretServicer
from services.registry.api.workflows import WorkflowServicer
from services.registry.storage import SCHEMA
from services.registry.storage.tenancy import TenancyStore
from services.registry.storage.webhook_secrets import WebhookSecretStore
from services.registry.storage.workflows import WorkflowStore
from services.registry.tenancy import Tenancy
from services.registry.workflows import WorkflowCatalog

MIGRATIONS = load_migrations(Path(__file__).parent / "storage" / "migrations")


@dataclass
class Registry:
    bindings: list[ServiceBinding]
    # The registry owns API keys, so it is also the key store servers authenticate with.
    keys: TenancyStore
    tenancy: Tenancy
    catalog: WorkflowCatalog
    relay: OutboxRelay
    bus: Bus

    async def start(self) -> None:
        await self.bus.ensure_topic(bus_topics.REGISTRY_WORKFLOWS, compacted=True)
        await self.bus.ensure_topic(bus_topics.REGISTRY_TENANTS, compacted=True)
        await self.tenancy.announce_existing_projects()
        self.relay.start()

    async def stop(self) -> None:
        await self.relay.stop()


def build_registry(pool: AsyncConnectionPool, bus: Bus, outbox_poll_ms: int = 500) -> Registry:
    keys = TenancyStore(pool)
    relay = OutboxRelay(pool, SCHEMA, bus, poll_interval_s=outbox_poll_ms / 1000)
    catalog = WorkflowCatalog(
        WorkflowStore(pool), keys, WebhookSecretStore(), on_commit=relay.notify
    )
    tenancy = Tenancy(keys, on_commit=relay.notify)
    bindings = [
        ServiceBinding(
            "eventflow.registry.v1.WorkflowService",
            WorkflowServicer(catalog),
            workflow_service_pb2_grpc.add_WorkflowServiceServicer_to_server,
        ),
        ServiceBinding(
            "eventflow.registry.v1.TenancyService",
            TenancyServicer(tenancy),
            tenancy_service_pb2_grpc.add_TenancyServiceServicer_to_server,
        ),
        ServiceBinding(
            "eventflow.registry.v1.ApiKeyLookupService",
            ApiKeyLookupServicer(keys),
            key_lookup_service_pb2_grpc.add_ApiKeyLookupServiceServicer_to_server,
        ),
        ServiceBinding(
            "eventflow.registry.v1.WebhookSecretService",
            WebhookSecretServicer(catalog),
            webhook_secret_service_pb2_grpc.add_WebhookSecretServiceServicer_to_server,
        ),
    ]
    return Registry(bindings, keys, tenancy, catalog, relay, bus)
