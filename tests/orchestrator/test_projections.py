"""Projections read over the API, with the history of their writes (SPEC §6, §7).

The end-to-end tests run real actions on the stack; the storage and paging
tests write through the same storage function the worker uses, for an
instance made up here, so a test controls exactly which writes happen.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from aiokafka import AIOKafkaProducer
from eventflow.orchestrator.v1 import event_service_pb2 as ev
from eventflow.orchestrator.v1 import instance_service_pb2 as inst
from eventflow.orchestrator.v1 import projection_service_pb2 as pb
from eventflow.orchestrator.v1 import projection_service_pb2_grpc as pb_grpc
from eventflow.registry.v1 import workflow_pb2 as wf
from psycopg_pool import AsyncConnectionPool

from libs.db import open_pool, transaction
from libs.pagination import encode_token
from services.orchestrator.storage import projections as store
from services.orchestrator.storage.instances import InstanceRow
from services.orchestrator.storage.sandbox import delete_sandbox
from tests.conftest import Tenant, make_tenant
from tests.integration.helpers import rpc_error, violation_fields
from tests.orchestrator.conftest import (
    Orchestrated,
    create_and_publish,
    eventually,
    send_structured,
)
from tests.orchestrator.test_effects import approved
from tests.orchestrator.test_end_to_end import trigger

ORDER = {
    "name": "orders",
    "entity_type": "order",
    "entity_id": 7,
    "title": "Order 7",
    "status": "paid",
    "data": {"total": 12.5},
}
# The executor refuses this output (only one entity half): the step fails at once.
HALF_KEYED = {"projection": {"name": "x", "entity_type": "t"}}


@pytest.fixture(scope="module")
async def pool(stack: Any, database_url: str) -> AsyncIterator[AsyncConnectionPool]:
    """Our own connections to the stack's database (migrated by the stack)."""
    opened = await open_pool(database_url, max_size=2)
    yield opened
    await opened.close()


class Reader:
    """ProjectionService as one tenant's viewer, in the tenant's project."""

    def __init__(self, tenant: Tenant) -> None:
        self.stub = pb_grpc.ProjectionServiceStub(tenant.channel)
        self.md = tenant.metadata("viewer")
        self.project = tenant.project

    def get(self, **fields: Any) -> Awaitable[pb.GetProjectionResponse]:
        request = pb.GetProjectionRequest(project_id=self.project, **fields)
        return self.stub.GetProjection(request, metadata=self.md)

    def list(self, **fields: Any) -> Awaitable[pb.ListProjectionsResponse]:
        request = pb.ListProjectionsRequest(project_id=self.project, **fields)
        return self.stub.ListProjections(request, metadata=self.md)

    def history(self, **fields: Any) -> Awaitable[pb.ListProjectionHistoryResponse]:
        request = pb.ListProjectionHistoryRequest(project_id=self.project, **fields)
        return self.stub.ListProjectionHistory(request, metadata=self.md)


def an_instance(tenant: Tenant, *, environment: str = "production", **fields: Any) -> InstanceRow:
    """An instance of a made-up workflow for a made-up event of ``tenant``."""
    now = datetime.now(UTC)
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "organization_id": tenant.org,
        "project_id": tenant.project,
        "environment": environment,
        "workflow_id": uuid.uuid4(),
        "workflow_version": 1,
        "definition": {"steps": []},
        "event": uuid.uuid4(),
        "event_id": f"evt-{uuid.uuid4().hex[:8]}",
        "subject": None,
        "status": "running",
        "next_step": 0,
        "attempt": 1,
        "waiting": False,
        "wake_time": now,
        "claimed_by": None,
        "claim_expires": None,
        "is_test": False,
        "skip_side_effects": False,
        "run_key": "",
        "create_time": now,
        "update_time": now,
    }
    values.update(fields)
    return InstanceRow(**values)


async def write(
    pool: AsyncConnectionPool, instance: InstanceRow, projection: dict[str, Any], step: int = 0
) -> uuid.UUID:
    async with transaction(pool) as conn:
        return await store.write(conn, instance, step, projection)


async def instances_of(o: Orchestrated, workflow_id: str) -> list[Any]:
    found = await o.instances.ListInstances(
        inst.ListInstancesRequest(project_id=o.tenant.project, workflow_id=workflow_id),
        metadata=o.md,
    )
    return list(found.instances)


async def all_ran(o: Orchestrated, workflow_id: str, at_least: int) -> list[Any]:
    """Every instance of the workflow, once at least ``at_least`` exist and all ended."""
    result: list[Any] = []

    async def ended() -> bool:
        result[:] = await instances_of(o, workflow_id)
        return len(result) >= at_least and all(i.status in ("completed", "failed") for i in result)

    await eventually(ended, f"{at_least} instances of {workflow_id} to end")
    return result


async def live(o: Orchestrated, event_type: str, producer: AIOKafkaProducer) -> None:
    """Probe until the workflow reacts (probes run it too, and write projections)."""

    async def probe() -> bool:
        event_id = await send_structured(producer, o.tenant, event_type, {"probe": True})
        await asyncio.sleep(0.3)
        return bool(await o.reactions(event_id))

    await eventually(probe, f"workflow for {event_type} to be live")


# ------------------------------------------------------------- end to end


async def test_an_upsert_keeps_one_row_and_its_history_names_every_write(
    tenant: Tenant, producer: AIOKafkaProducer
) -> None:
    action = await approved(tenant, {"projection": ORDER})
    event_type = trigger()
    workflow_id, _ = await create_and_publish(
        tenant, event_type, [wf.Step(type="custom_action", action=action)]
    )
    o = Orchestrated(tenant)
    await live(o, event_type, producer)
    sent = []
    for _ in range(2):
        sent.append(await send_structured(producer, tenant, event_type, {}))
        [reaction] = await o.settled(sent[-1])
        assert reaction.instance_status == "completed"
    runs = await all_ran(o, workflow_id, at_least=3)

    key = {"name": "orders", "entity_type": "order", "entity_id": "7"}
    got = await Reader(tenant).get(**key)
    row = got.projection
    assert (row.organization_id, row.project_id, row.environment) == (
        tenant.org,
        tenant.project,
        "production",
    )
    assert (row.name, row.entity_type, row.entity_id, row.title, row.status) == (
        "orders",
        "order",
        "7",
        "Order 7",
        "paid",
    )
    assert json.loads(row.data_json) == {"total": 12.5}
    assert row.last_event_id == sent[-1]
    listed = await Reader(tenant).list(name="orders")
    assert [p.id for p in listed.projections] == [row.id]

    history = await Reader(tenant).history(**key)
    writes = list(history.writes)
    # One write per instance (the probes' included), newest first.
    assert sorted(w.instance_id for w in writes) == sorted(i.id for i in runs)
    assert {w.event_id for w in writes} == {i.event_id for i in runs}
    assert [w.event_id for w in writes if w.event_id in sent] == sent[::-1]
    assert all(
        (w.workflow_id, w.workflow_version, w.step, w.title, w.status, w.replay)
        == (workflow_id, 1, 0, "Order 7", "paid", False)
        for w in writes
    )
    assert all(json.loads(w.data_json) == {"total": 12.5} for w in writes)
    times = [w.write_time.ToDatetime() for w in writes]
    assert times == sorted(times, reverse=True)


async def test_an_unkeyed_projection_is_one_row_per_event(
    tenant: Tenant, producer: AIOKafkaProducer
) -> None:
    action = await approved(tenant, {"projection": {"name": "audit", "data": {"seen": True}}})
    event_type = trigger()
    workflow_id, _ = await create_and_publish(
        tenant, event_type, [wf.Step(type="custom_action", action=action)]
    )
    o = Orchestrated(tenant)
    await live(o, event_type, producer)
    for _ in range(2):
        await o.settled(await send_structured(producer, tenant, event_type, {}))
    runs = await all_ran(o, workflow_id, at_least=3)
    listed = await Reader(tenant).list(name="audit")
    rows = list(listed.projections)
    assert sorted(p.last_event_id for p in rows) == sorted(i.event_id for i in runs)
    assert all((p.entity_type, p.entity_id) == ("", "") for p in rows)
    assert all(json.loads(p.data_json) == {"seen": True} for p in rows)


async def test_a_redrive_of_the_same_event_rewrites_its_appended_row(
    tenant: Tenant, producer: AIOKafkaProducer
) -> None:
    audit = await approved(tenant, {"projection": {"name": "audit", "status": "seen"}})
    broken = await approved(tenant, HALF_KEYED)
    event_type = trigger()
    await create_and_publish(
        tenant,
        event_type,
        [wf.Step(type="custom_action", action=audit), wf.Step(type="custom_action", action=broken)],
    )
    o = Orchestrated(tenant)
    await live(o, event_type, producer)
    event_id = await send_structured(producer, tenant, event_type, {})
    [failed] = await o.settled(event_id)
    assert failed.instance_status == "failed"

    async def rows_of_event() -> list[Any]:
        listed = await Reader(tenant).list(name="audit", page_size=200)
        return [p for p in listed.projections if p.last_event_id == event_id]

    [before] = await rows_of_event()
    assert before.last_instance_id == failed.instance_id
    letters = await o.dead_letters.ListDeadLetters(
        inst.ListDeadLettersRequest(project_id=tenant.project), metadata=o.md
    )
    [letter] = [d for d in letters.dead_letters if d.event_id == event_id]
    redriven = await o.dead_letters.RedriveDeadLetter(
        inst.RedriveDeadLetterRequest(id=letter.id, from_start=True), metadata=o.md
    )
    await o.settled(event_id, count=2)
    [after] = await rows_of_event()
    assert after.id == before.id
    assert after.last_instance_id == redriven.instance_id


async def test_a_replay_is_a_marked_write_and_rewrites_the_appended_row(
    tenant: Tenant, producer: AIOKafkaProducer
) -> None:
    keyed = await approved(tenant, {"projection": ORDER})
    audit = await approved(tenant, {"projection": {"name": "audit", "status": "seen"}})
    event_type = trigger()
    await create_and_publish(
        tenant,
        event_type,
        [wf.Step(type="custom_action", action=keyed), wf.Step(type="custom_action", action=audit)],
    )
    o = Orchestrated(tenant)
    await live(o, event_type, producer)
    event_id = await send_structured(producer, tenant, event_type, {})
    [original] = await o.settled(event_id)
    replayed = await o.events.ReplayEvent(
        ev.ReplayEventRequest(event_id=event_id, project_id=tenant.project), metadata=o.md
    )
    [replay_instance] = replayed.instance_ids
    await o.settled(event_id, count=2)

    key = {"name": "orders", "entity_type": "order", "entity_id": "7"}
    history = await Reader(tenant).history(**key)
    mine = [(w.instance_id, w.replay) for w in history.writes if w.event_id == event_id]
    assert mine == [(replay_instance, True), (original.instance_id, False)]
    listed = await Reader(tenant).list(name="orders")
    assert len(listed.projections) == 1
    appended = await Reader(tenant).list(name="audit", page_size=200)
    [row] = [p for p in appended.projections if p.last_event_id == event_id]
    assert row.last_instance_id == replay_instance


# ---------------------------------------------------------------- storage


async def test_rewriting_an_event_workflow_and_step_keeps_one_appended_row(
    tenant: Tenant, pool: AsyncConnectionPool
) -> None:
    first = an_instance(tenant)
    replay = an_instance(
        tenant,
        event=first.event,
        event_id=first.event_id,
        workflow_id=first.workflow_id,
        run_key=f"replay:{uuid.uuid4()}",
    )
    async with transaction(pool) as conn:
        original = await store.write(conn, first, 2, {"name": "audit", "status": "one"})
        again = await store.write(conn, replay, 2, {"name": "audit", "status": "two"})
        other_step = await store.write(conn, first, 3, {"name": "audit", "status": "three"})
        rows = await store.list_page(
            conn, tenant.org, tenant.project, "production", "audit", "", "", None, 10
        )
        history = await store.history_page(conn, original, None, 10)
    assert again == original != other_step
    assert sorted((r.id, r.status) for r in rows) == sorted(
        [(original, "two"), (other_step, "three")]
    )
    [row] = [r for r in rows if r.id == original]
    assert (row.last_instance, row.last_event_id) == (replay.id, first.event_id)
    assert [(w.instance_id, w.status, w.replay, w.step) for w in history] == [
        (replay.id, "two", True, 2),
        (first.id, "one", False, 2),
    ]


async def test_a_write_of_an_instance_that_skips_side_effects_is_marked_a_replay(
    tenant: Tenant, pool: AsyncConnectionPool
) -> None:
    key = {"name": "orders", "entity_type": "order", "entity_id": "a-1"}
    await write(pool, an_instance(tenant), {**key, "status": "new"})
    replayed = an_instance(tenant, skip_side_effects=True)
    projection = await write(pool, replayed, {**key, "status": "paid"})
    async with transaction(pool) as conn:
        history = await store.history_page(conn, projection, None, 10)
    assert [(w.status, w.replay) for w in history] == [("paid", True), ("new", False)]
    assert history[0].event_id == replayed.event_id


async def test_a_sandbox_reset_takes_the_history_with_the_projection(
    tenant: Tenant, pool: AsyncConnectionPool
) -> None:
    key = {"name": "orders", "entity_type": "order", "entity_id": "r-1"}
    sandbox = await write(pool, an_instance(tenant, environment="sandbox"), key)
    production = await write(pool, an_instance(tenant), key)
    async with transaction(pool) as conn:
        await delete_sandbox(conn, tenant.org, tenant.project)
        cur = await conn.execute(
            "SELECT projection, count(*) AS n FROM orchestrator.projection_writes"
            " WHERE projection = ANY(%s) GROUP BY projection",
            ([sandbox, production],),
        )
        left = {r["projection"]: r["n"] for r in await cur.fetchall()}
    assert left == {production: 1}


# ------------------------------------------------------------------ reads


async def test_listing_pages_through_every_row_once_newest_update_first(
    tenant: Tenant, pool: AsyncConnectionPool
) -> None:
    instance = an_instance(tenant)
    # One transaction: every row gets the same update time, so paging relies on the id.
    async with transaction(pool) as conn:
        ids = [
            await store.write(conn, instance, n, {"name": "items", "entity_type": "item",
                                                  "entity_id": n})
            for n in range(7)
        ]  # fmt: skip
    touched = await write(
        pool, an_instance(tenant), {"name": "items", "entity_type": "item", "entity_id": 3}
    )
    seen: list[Any] = []
    token, pages = "", 0
    while True:
        page = await Reader(tenant).list(name="items", page_size=3, page_token=token)
        seen.extend(page.projections)
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert pages == 3
    assert sorted(p.id for p in seen) == sorted(str(i) for i in ids)
    assert seen[0].id == str(touched)  # the row updated last comes first
    times = [p.update_time.ToDatetime() for p in seen]
    assert times == sorted(times, reverse=True)


async def test_listing_filters_by_entity_type_and_status(
    tenant: Tenant, pool: AsyncConnectionPool
) -> None:
    for entity_type, entity_id, status in (
        ("order", 1, "paid"),
        ("order", 2, "open"),
        ("refund", 1, "paid"),
    ):
        await write(
            pool,
            an_instance(tenant),
            {"name": "ledger", "entity_type": entity_type, "entity_id": entity_id,
             "status": status},
        )  # fmt: skip
    await write(pool, an_instance(tenant), {"name": "ledger", "status": "paid"})

    async def keys(**filters: Any) -> set[tuple[str, str]]:
        found = await Reader(tenant).list(name="ledger", **filters)
        return {(p.entity_type, p.entity_id) for p in found.projections}

    assert await keys() == {("order", "1"), ("order", "2"), ("refund", "1"), ("", "")}
    assert await keys(entity_type="order") == {("order", "1"), ("order", "2")}
    assert await keys(status="paid") == {("order", "1"), ("refund", "1"), ("", "")}
    assert await keys(entity_type="order", status="paid") == {("order", "1")}
    assert await keys(status="void") == set()


async def test_history_pages_newest_first(tenant: Tenant, pool: AsyncConnectionPool) -> None:
    key = {"name": "orders", "entity_type": "order", "entity_id": "h-1"}
    writers = [an_instance(tenant) for _ in range(5)]
    for n, instance in enumerate(writers):
        await write(pool, instance, {**key, "status": f"s{n}"})
    seen: list[Any] = []
    token = ""
    for expected in (2, 2, 1):
        page = await Reader(tenant).history(**key, page_size=2, page_token=token)
        assert len(page.writes) == expected
        seen.extend(page.writes)
        token = page.next_page_token
    assert token == ""
    assert [(w.event_id, w.status) for w in seen] == [
        (i.event_id, f"s{n}") for n, i in reversed(list(enumerate(writers)))
    ]


async def test_another_organization_sees_none_of_them(
    tenant: Tenant, pool: AsyncConnectionPool, channel: grpc.aio.Channel, operator_token: str
) -> None:
    key = {"name": "orders", "entity_type": "order", "entity_id": "secret-1"}
    await write(pool, an_instance(tenant), key)
    other = await make_tenant(channel, operator_token)
    assert other.project == tenant.project  # same project id, different organization
    for call in (
        Reader(other).get(**key),
        Reader(other).history(**key),
    ):
        error = await rpc_error(call)
        assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
    listed = await Reader(other).list(name="orders")
    assert list(listed.projections) == []
    mine = await Reader(tenant).get(**key)
    assert mine.projection.entity_id == "secret-1"


async def test_a_missing_projection_is_not_found(tenant: Tenant) -> None:
    error = await rpc_error(
        Reader(tenant).get(name="orders", entity_type="order", entity_id="nope")
    )
    assert error.code == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    ("request_fields", "fields"),
    [
        ({"entity_type": "order", "entity_id": "1"}, ["name"]),
        ({"name": "orders", "entity_id": "1"}, ["entity_type"]),
        ({"name": "orders", "entity_type": "order"}, ["entity_id"]),
        ({}, ["name", "entity_type", "entity_id"]),
        ({"name": "Orders!", "entity_type": "order", "entity_id": "1"}, ["name"]),
        ({"name": "orders", "entity_type": "order", "entity_id": "x" * 201}, ["entity_id"]),
        ({"name": "orders", "entity_type": "order", "entity_id": "a\0b"}, ["entity_id"]),
        ({"name": "orders", "entity_type": "order", "entity_id": "1", "environment": "qa"},
         ["environment"]),
    ],
)  # fmt: skip
async def test_get_names_the_field_it_refuses(
    tenant: Tenant, request_fields: dict[str, str], fields: list[str]
) -> None:
    error = await rpc_error(Reader(tenant).get(**request_fields))
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert violation_fields(error) == fields


async def test_list_and_history_name_the_field_they_refuse(tenant: Tenant) -> None:
    reader = Reader(tenant)
    key = {"name": "orders", "entity_type": "order", "entity_id": "1"}
    cases = [
        (reader.list(), "name"),
        (reader.list(name="orders", entity_type="Bad Type"), "entity_type"),
        (reader.list(name="orders", page_token="not-a-token"), "page_token"),
        (reader.list(name="orders", page_size=-1), "page_size"),
        (reader.list(name="orders", status="paid\0"), "status"),
        (reader.list(name="orders", environment="staging"), "environment"),
        (reader.history(name="orders", entity_id="1"), "entity_type"),
        (reader.history(**key, page_token=encode_token({"t": "later", "id": "x"})), "page_token"),
    ]
    for call, field in cases:
        error = await rpc_error(call)
        assert (error.code, violation_fields(error)) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            [field],
        )


async def test_sandbox_reads_need_a_plan_with_a_sandbox(
    channel: grpc.aio.Channel, operator_token: str
) -> None:
    starter = await make_tenant(channel, operator_token, plan="starter")
    reasons: list[str] = []

    async def refused_by_plan() -> bool:
        # Until the orchestrator learns the new tenant, the project is unknown to it.
        error = await rpc_error(Reader(starter).list(name="orders", environment="sandbox"))
        reasons.append(error.reason)
        return error.reason == "SANDBOX_DISABLED"

    await eventually(refused_by_plan, "the starter plan to be known")
    key = {"name": "orders", "entity_type": "order", "entity_id": "1", "environment": "sandbox"}
    for call in (Reader(starter).get(**key), Reader(starter).history(**key)):
        error = await rpc_error(call)
        assert (error.code, error.reason) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "SANDBOX_DISABLED",
        )
    assert set(reasons) <= {"NOT_FOUND", "SANDBOX_DISABLED"}
    production = await Reader(starter).list(name="orders")
    assert list(production.projections) == []


async def test_sandbox_and_production_projections_are_apart(
    tenant: Tenant, pool: AsyncConnectionPool
) -> None:
    key = {"name": "orders", "entity_type": "order", "entity_id": "s-1"}
    await write(pool, an_instance(tenant, environment="sandbox"), {**key, "status": "test"})
    error = await rpc_error(Reader(tenant).get(**key))
    assert error.code == grpc.StatusCode.NOT_FOUND
    found: list[Any] = []

    async def readable() -> bool:
        try:
            got = await Reader(tenant).get(**key, environment="sandbox")
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:  # the tenant not known yet
                raise
            return False
        found.append(got.projection)
        return True

    await eventually(readable, "the team tenant's sandbox to be readable")
    assert (found[0].environment, found[0].status) == ("sandbox", "test")
