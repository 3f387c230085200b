"""Sandbox reset and the sandbox plan gate (SPEC §2, §7).

Every check reads PostgreSQL directly: a reset must delete exactly one
project's sandbox rows, and leave every production row and every other
project's sandbox exactly as it was.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Awaitable
from typing import Any

import grpc
import psycopg
from eventflow.orchestrator.v1 import event_pb2
from eventflow.orchestrator.v1 import event_service_pb2 as ev
from eventflow.orchestrator.v1 import event_service_pb2_grpc as ev_grpc
from eventflow.orchestrator.v1 import sandbox_service_pb2 as sb
from eventflow.orchestrator.v1 import sandbox_service_pb2_grpc as sb_grpc
from eventflow.registry.v1 import tenancy_service_pb2 as tn
from eventflow.registry.v1 import workflow_pb2 as wf

from libs.errors import ErrorDetails, read_error
from tests.conftest import Tenant, bearer, make_tenant
from tests.integration.helpers import rpc_error
from tests.orchestrator.conftest import create_and_publish, eventually
from tests.orchestrator.test_effects import approved
from tests.orchestrator.test_end_to_end import trigger

TABLES = ("events", "instances", "instance_log", "dead_letters", "projections")
A_MONTH_MS = 30 * 24 * 3600 * 1000


@dataclasses.dataclass
class Place:
    """One (project, environment) of a tenant: publishes there and remembers what it sent."""

    tenant: Tenant
    project: str
    environment: str
    sent: list[str] = dataclasses.field(default_factory=list)

    @property
    def events(self) -> ev_grpc.EventServiceStub:
        return ev_grpc.EventServiceStub(self.tenant.channel)

    @property
    def md(self) -> tuple[tuple[str, str], ...]:
        return self.tenant.metadata("developer")

    async def publish(self, event_type: str) -> str:
        event = event_pb2.EventInput(
            type=event_type, project_id=self.project, environment=self.environment
        )
        published = await self.events.Publish(ev.PublishRequest(event=event), metadata=self.md)
        self.sent.append(published.event_id)
        return published.event_id

    async def reactions(self, event_id: str) -> list[Any]:
        try:
            found = await self.events.ListEventReactions(
                ev.ListEventReactionsRequest(
                    event_id=event_id, project_id=self.project, environment=self.environment
                ),
                metadata=self.md,
            )
        except grpc.aio.AioRpcError:
            return []
        return list(found.reactions)

    async def stored(self, event_id: str) -> bool:
        try:
            await self.events.GetEvent(
                ev.GetEventRequest(
                    id=event_id, project_id=self.project, environment=self.environment
                ),
                metadata=self.md,
            )
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                return False
            raise
        return True

    async def all_stored(self) -> bool:
        return all([await self.stored(event_id) for event_id in self.sent])

    async def run_every_workflow(self, event_type: str, workflows: int) -> None:
        """Publish until one event starts all ``workflows`` (they go live over Kafka)."""

        async def all_started() -> bool:
            event_id = await self.publish(event_type)
            await eventually(lambda: self.stored(event_id), f"event {event_id} to be stored")
            # Ingest starts the instances in the transaction that stores the event.
            return len(await self.reactions(event_id)) == workflows

        await eventually(all_started, f"{workflows} workflows live in {self}", timeout_s=60)


async def failure(call: Awaitable[Any]) -> ErrorDetails | None:
    """How a call failed, or None if it succeeded."""
    try:
        await call
    except grpc.aio.AioRpcError as error:
        return read_error(error)
    return None


async def snapshot(database_url: str, org: str, project: str, environment: str) -> dict[str, Any]:
    """Every row of one (project, environment), as JSON text, in a fixed order."""
    where = "t.organization_id = %s AND t.project_id = %s AND t.environment = %s"
    queries = {
        table: f"SELECT row_to_json(t)::text FROM orchestrator.{table} t WHERE {where} ORDER BY id"
        for table in ("events", "instances", "dead_letters", "projections")
    }
    # Rows that belong to a row above: an instance's log, a projection's history.
    children = [("instance_log", "instance_id", "instances", "c.instance_id, c.position")]
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute("SELECT to_regclass('orchestrator.projection_writes')")
        if (await cur.fetchone()) != (None,):
            children.append(("projection_writes", "projection", "projections", "c.id"))
        for child, column, parent, order in children:
            queries[child] = (
                f"SELECT row_to_json(c)::text FROM orchestrator.{child} c"
                f" JOIN orchestrator.{parent} t ON t.id = c.{column} WHERE {where} ORDER BY {order}"
            )
        return {
            table: [
                row[0]
                for row in await (await conn.execute(query, (org, project, environment))).fetchall()
            ]
            for table, query in queries.items()
        }


async def settled(database_url: str, org: str) -> bool:
    """No instance of the organization is mid-step: each has ended or waits on a timer."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM orchestrator.instances WHERE organization_id = %s"
            " AND status = 'running' AND NOT waiting",
            (org,),
        )
        row = await cur.fetchone()
        return row is not None and row[0] == 0


def sandbox(tenant: Tenant) -> sb_grpc.SandboxServiceStub:
    return sb_grpc.SandboxServiceStub(tenant.channel)


async def add_project(tenant: Tenant, operator_token: str, project: str) -> Tenant:
    await tenant.tenancy.CreateProject(
        tn.CreateProjectRequest(organization_id=tenant.org, project=tn.Project(id=project)),
        metadata=bearer(operator_token),
    )
    return dataclasses.replace(tenant, project=project)


async def test_reset_deletes_one_projects_sandbox_and_nothing_else(
    tenant: Tenant, operator_token: str, database_url: str
) -> None:
    side = await add_project(tenant, operator_token, f"side-{uuid.uuid4().hex[:6]}")
    projecting = await approved(
        tenant,
        {"projection": {"name": "orders", "entity_type": "order", "entity_id": 1, "data": {}}},
    )
    # A keyed projection without an entity id: the output is refused, into the DLQ.
    failing = await approved(tenant, {"projection": {"name": "orders", "entity_type": "order"}})
    event_type = trigger()
    steps = [
        [wf.Step(type="custom_action", action=projecting)],
        [wf.Step(type="custom_action", action=failing)],
        [wf.Step(type="delay", duration_ms=A_MONTH_MS)],
    ]
    for environment in ("sandbox", "production"):
        for workflow_steps in steps:
            await create_and_publish(tenant, event_type, workflow_steps, environment=environment)
    for workflow_steps in (steps[0], steps[2]):
        await create_and_publish(side, event_type, workflow_steps, environment="sandbox")

    target = Place(tenant, tenant.project, "sandbox")
    production = Place(tenant, tenant.project, "production")
    other = Place(tenant, side.project, "sandbox")
    await eventually(lambda: _accepts(target, event_type), "the tenant to reach the orchestrator")
    await target.run_every_workflow(event_type, 3)
    await production.run_every_workflow(event_type, 3)
    await other.run_every_workflow(event_type, 2)
    for place in (target, production, other):
        await eventually(place.all_stored, f"every event sent to {place} to be stored")
    await eventually(lambda: settled(database_url, tenant.org), "every instance to settle")

    before = await snapshot(database_url, tenant.org, tenant.project, "sandbox")
    production_before = await snapshot(database_url, tenant.org, tenant.project, "production")
    other_before = await snapshot(database_url, tenant.org, side.project, "sandbox")
    assert all(before[table] for table in before), "the scenario must fill every table"
    assert await timers(database_url, tenant.org, tenant.project, "sandbox") >= 1
    assert all(production_before[table] for table in TABLES)

    reset = await sandbox(tenant).ResetSandbox(
        sb.ResetSandboxRequest(project_id=tenant.project), metadata=tenant.metadata("developer")
    )

    assert (
        reset.events_deleted,
        reset.instances_deleted,
        reset.dead_letters_deleted,
        reset.projections_deleted,
    ) == (
        len(before["events"]),
        len(before["instances"]),
        len(before["dead_letters"]),
        len(before["projections"]),
    )
    after = await snapshot(database_url, tenant.org, tenant.project, "sandbox")
    assert after == {table: [] for table in before}
    assert await log_rows_of(database_url, before["instances"]) == 0
    assert await timers(database_url, tenant.org, tenant.project, "sandbox") == 0
    assert await snapshot(database_url, tenant.org, tenant.project, "production") == (
        production_before
    )
    assert await snapshot(database_url, tenant.org, side.project, "sandbox") == other_before

    # The workflows stay: the emptied sandbox runs new events at once.
    fresh = await target.publish(event_type)
    await eventually(
        lambda: _reaction_count(target, fresh, 3), "the sandbox workflows to run again"
    )
    await eventually(lambda: settled(database_url, tenant.org), "the new instances to settle")
    again = await sandbox(tenant).ResetSandbox(
        sb.ResetSandboxRequest(project_id=tenant.project), metadata=tenant.metadata("developer")
    )
    assert (again.events_deleted, again.instances_deleted) == (1, 3)


async def _accepts(place: Place, event_type: str) -> bool:
    try:
        await place.publish(event_type)
    except grpc.aio.AioRpcError as error:
        if error.code() == grpc.StatusCode.NOT_FOUND:
            return False
        raise
    return True


async def _reaction_count(place: Place, event_id: str, count: int) -> bool:
    return len(await place.reactions(event_id)) == count


async def timers(database_url: str, org: str, project: str, environment: str) -> int:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM orchestrator.instances WHERE organization_id = %s"
            " AND project_id = %s AND environment = %s AND waiting AND wake_time > now()",
            (org, project, environment),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


async def log_rows_of(database_url: str, instance_rows: list[str]) -> int:
    ids = [uuid.UUID(json.loads(row)["id"]) for row in instance_rows]
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM orchestrator.instance_log WHERE instance_id = ANY(%s)", (ids,)
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


async def test_another_organization_or_project_key_cannot_reset_this_project(
    tenant: Tenant, operator_token: str, channel: grpc.aio.Channel, database_url: str
) -> None:
    mine = await add_project(tenant, operator_token, f"own-{uuid.uuid4().hex[:6]}")
    place = Place(tenant, mine.project, "sandbox")
    await eventually(lambda: _accepts(place, trigger()), "the project to reach the orchestrator")
    await eventually(lambda: place.stored(place.sent[-1]), "the event to be stored")
    before = await snapshot(database_url, tenant.org, mine.project, "sandbox")
    assert len(before["events"]) == 1

    stranger = await make_tenant(channel, operator_token)
    error = await rpc_error(
        sandbox(stranger).ResetSandbox(
            sb.ResetSandboxRequest(project_id=mine.project), metadata=stranger.metadata("admin")
        )
    )
    assert error.code == grpc.StatusCode.NOT_FOUND
    bound = await tenant.tenancy.CreateApiKey(
        tn.CreateApiKeyRequest(organization_id=tenant.org, project_id="main", role="admin"),
        metadata=bearer(operator_token),
    )
    error = await rpc_error(
        sandbox(tenant).ResetSandbox(
            sb.ResetSandboxRequest(project_id=mine.project), metadata=bearer(bound.secret)
        )
    )
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "PROJECT_NOT_ALLOWED")
    error = await rpc_error(
        sandbox(tenant).ResetSandbox(
            sb.ResetSandboxRequest(project_id=mine.project), metadata=tenant.metadata("viewer")
        )
    )
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_TOO_LOW")
    assert await snapshot(database_url, tenant.org, mine.project, "sandbox") == before


def refused(error: ErrorDetails | None) -> bool:
    return error is not None and (error.code, error.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "SANDBOX_DISABLED",
    )


async def test_every_sandbox_call_is_refused_on_the_starter_plan(
    channel: grpc.aio.Channel, operator_token: str
) -> None:
    starter = await make_tenant(channel, operator_token, plan="starter")
    place = Place(starter, starter.project, "sandbox")

    async def reading_refused() -> bool:
        return refused(await failure(place.stored(str(uuid.uuid4()))))

    await eventually(reading_refused, "the tenant to reach the orchestrator")
    for call in (
        sandbox(starter).ResetSandbox(
            sb.ResetSandboxRequest(project_id=starter.project), metadata=place.md
        ),
        place.publish(trigger()),
        place.events.ListEventReactions(
            ev.ListEventReactionsRequest(
                event_id="e-1", project_id=starter.project, environment="sandbox"
            ),
            metadata=place.md,
        ),
    ):
        assert refused(await rpc_error(call))
    error = await rpc_error(
        place.events.GetEvent(
            ev.GetEventRequest(id="e-1", project_id=starter.project, environment="staging"),
            metadata=place.md,
        )
    )
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_downgrade_to_starter_refuses_the_reset_and_keeps_the_sandbox(
    tenant: Tenant, operator_token: str, database_url: str
) -> None:
    event_type = trigger()
    await create_and_publish(
        tenant, event_type, [wf.Step(type="delay", duration_ms=A_MONTH_MS)], environment="sandbox"
    )
    place = Place(tenant, tenant.project, "sandbox")
    await eventually(lambda: _accepts(place, event_type), "the tenant to reach the orchestrator")
    await place.run_every_workflow(event_type, 1)
    await eventually(place.all_stored, "every event sent to be stored")
    await eventually(lambda: settled(database_url, tenant.org), "every instance to settle")
    await tenant.tenancy.UpdateOrganizationPlan(
        tn.UpdateOrganizationPlanRequest(id=tenant.org, plan="starter"),
        metadata=bearer(operator_token),
    )

    async def reading_refused() -> bool:
        return refused(await failure(place.stored(place.sent[0])))

    # Poll with a read: polling the reset could empty the sandbox before the plan arrives.
    await eventually(reading_refused, "the downgrade to reach the orchestrator")
    before = await snapshot(database_url, tenant.org, tenant.project, "sandbox")
    assert before["events"] and before["instances"]
    assert refused(
        await rpc_error(
            sandbox(tenant).ResetSandbox(
                sb.ResetSandboxRequest(project_id=tenant.project), metadata=place.md
            )
        )
    )
    assert refused(await rpc_error(place.publish(event_type)))
    assert refused(
        await rpc_error(
            place.events.ListEventReactions(
                ev.ListEventReactionsRequest(
                    event_id=place.sent[0], project_id=tenant.project, environment="sandbox"
                ),
                metadata=place.md,
            )
        )
    )
    assert await snapshot(database_url, tenant.org, tenant.project, "sandbox") == before
