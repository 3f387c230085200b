"""Projects and their plans reach the compacted tenants topic (the registry's
contract with the orchestrator; record format in tenant_state.proto)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import grpc
import psycopg
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from eventflow.registry.v1 import tenancy_service_pb2 as tn
from eventflow.registry.v1 import tenant_state_pb2

from cli.stack import Stack
from libs.bus import KafkaBus, Record
from libs.bus import topics as bus_topics
from tests.conftest import Tenant, bearer, make_tenant
from tests.integration.helpers import rpc_error


class TenantReader:
    """Reads the tenants topic as the orchestrator will: a consumer group from the start."""

    def __init__(self, bootstrap: str) -> None:
        self.bus = KafkaBus(bootstrap)
        self.records: list[Record] = []

    async def __aenter__(self) -> TenantReader:
        await self.bus.start()

        async def handle(batch: Sequence[Record]) -> None:
            self.records.extend(batch)

        self.bus.subscribe([bus_topics.REGISTRY_TENANTS], f"reader-{uuid.uuid4().hex[:8]}", handle)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.bus.stop()

    def states(self, org: str, project: str) -> list[tenant_state_pb2.TenantState]:
        return [
            tenant_state_pb2.TenantState.FromString(r.value)
            for r in self.records
            if r.key == f"{org}/{project}".encode() and r.value is not None
        ]

    async def wait_for(
        self, org: str, project: str, count: int
    ) -> list[tenant_state_pb2.TenantState]:
        for _ in range(600):
            found = self.states(org, project)
            if len(found) >= count:
                return found
            await asyncio.sleep(0.05)
        raise AssertionError(
            f"expected {count} records for {org}/{project}, got {len(self.states(org, project))}"
        )


async def add_project(tenant: Tenant, project_id: str) -> None:
    await tenant.tenancy.CreateProject(
        tn.CreateProjectRequest(project=tn.Project(id=project_id)),
        metadata=tenant.metadata("admin"),
    )


async def set_plan(tenant: Tenant, operator_token: str, plan: str) -> None:
    await tenant.tenancy.UpdateOrganizationPlan(
        tn.UpdateOrganizationPlanRequest(id=tenant.org, plan=plan), metadata=bearer(operator_token)
    )


async def test_a_new_project_is_published_with_its_plan(
    channel: grpc.aio.Channel, operator_token: str, kafka_bootstrap: str
) -> None:
    async with TenantReader(kafka_bootstrap) as reader:
        tenant = await make_tenant(channel, operator_token, plan="starter")
        [state] = await reader.wait_for(tenant.org, "main", 1)
        await add_project(tenant, "billing")
        [billing] = await reader.wait_for(tenant.org, "billing", 1)
        record = next(r for r in reader.records if r.key == f"{tenant.org}/main".encode())
    assert (state.organization_id, state.project_id, state.plan) == (tenant.org, "main", "starter")
    assert state.revision == 1 and state.change_time.seconds > 0
    assert (billing.project_id, billing.plan, billing.revision) == ("billing", "starter", 1)
    assert record.header("content-type") == b"application/x-protobuf"
    assert record.header("ce_type") == b"eventflow.registry.v1.TenantState"


async def test_a_plan_change_republishes_every_project_with_a_higher_revision(
    tenant: Tenant, operator_token: str, kafka_bootstrap: str
) -> None:
    await add_project(tenant, "billing")
    async with TenantReader(kafka_bootstrap) as reader:
        await reader.wait_for(tenant.org, "billing", 1)
        await set_plan(tenant, operator_token, "starter")
        main = await reader.wait_for(tenant.org, "main", 2)
        billing = await reader.wait_for(tenant.org, "billing", 2)
        await set_plan(tenant, operator_token, "starter")  # no change: nothing published
        await set_plan(tenant, operator_token, "enterprise")
        main = await reader.wait_for(tenant.org, "main", 3)
        await asyncio.sleep(0.5)
        main, billing = reader.states(tenant.org, "main"), reader.states(tenant.org, "billing")
    assert [(s.plan, s.revision) for s in main] == [
        ("team", 1),
        ("starter", 2),
        ("enterprise", 3),
    ]
    assert [(s.plan, s.revision) for s in billing] == [
        ("team", 1),
        ("starter", 2),
        ("enterprise", 3),
    ]


async def test_a_project_created_later_carries_the_current_plan_and_revision(
    tenant: Tenant, operator_token: str, kafka_bootstrap: str
) -> None:
    await set_plan(tenant, operator_token, "enterprise")
    async with TenantReader(kafka_bootstrap) as reader:
        await add_project(tenant, "late")
        [late] = await reader.wait_for(tenant.org, "late", 1)
    assert (late.plan, late.revision) == ("enterprise", 2)


async def test_a_failed_project_creation_publishes_nothing(
    tenant: Tenant, kafka_bootstrap: str
) -> None:
    async with TenantReader(kafka_bootstrap) as reader:
        await reader.wait_for(tenant.org, "main", 1)
        error = await rpc_error(add_project(tenant, "main"))
        assert error.code == grpc.StatusCode.ALREADY_EXISTS
        await asyncio.sleep(1.0)
        assert len(reader.states(tenant.org, "main")) == 1


async def test_projects_from_before_the_topic_are_announced_once_at_start(
    tenant: Tenant, stack: Stack, database_url: str, kafka_bootstrap: str
) -> None:
    registry = stack.registry
    assert registry is not None
    async with TenantReader(kafka_bootstrap) as reader:
        await reader.wait_for(tenant.org, "main", 1)
        # What migration 0002 leaves for every project that existed before it.
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            await conn.execute(
                "INSERT INTO registry.unannounced_projects (organization_id, project_id)"
                " VALUES (%s, 'main')",
                (tenant.org,),
            )
            await conn.commit()
        assert await registry.tenancy.announce_existing_projects() == 1
        assert await registry.tenancy.announce_existing_projects() == 0
        states = await reader.wait_for(tenant.org, "main", 2)
    assert [(s.plan, s.revision) for s in states] == [("team", 1), ("team", 1)]


async def test_the_registry_creates_the_topic_compacted(stack: Stack, kafka_bootstrap: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        described = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, bus_topics.REGISTRY_TENANTS)]
        )
    finally:
        await admin.close()
    configs = {entry[0]: entry[1] for entry in described[0].resources[0][4]}
    assert configs["cleanup.policy"] == "compact"
    assert bus_topics.REGISTRY_TENANTS in bus_topics.COMPACTED
