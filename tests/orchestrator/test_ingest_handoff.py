"""Ingest hands the instances it starts straight to its process's worker (the eager start).

The worker claims them, with their first steps started, in the ingest's own transaction,
and runs them once it commits: no claim of their own, no poll between. Only as many as the
worker has free slots for; a hold or a delay first is left to the usual claim. Each test
drives a worker whose claim loop is not started, against the real stack's database, so
whatever it runs it can only have had from the handoff.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import psycopg
import pytest
from aiokafka import AIOKafkaProducer
from eventflow.orchestrator.v1 import instance_service_pb2 as inst
from eventflow.registry.v1 import workflow_pb2 as wf

from libs.bus import Record
from libs.bus import topics as bus_topics
from libs.db import open_pool, transaction
from services.orchestrator.domain.outcomes import Outcome
from services.orchestrator.events import ingest as ingest_module
from services.orchestrator.events.ingest import Ingest
from services.orchestrator.runner.steps import StepContext, StepRunner
from services.orchestrator.runner.worker import Worker
from services.orchestrator.storage import instances as instance_store
from tests.conftest import Tenant
from tests.orchestrator.conftest import Receiver, eventually, structured
from tests.orchestrator.test_behaviour import live_webhook_workflow


class RecordingSteps:
    """Completes every step at once and remembers which instances it ran."""

    def __init__(self) -> None:
        self.ran: list[uuid.UUID] = []

    async def run(self, ctx: StepContext) -> Outcome:
        self.ran.append(ctx.instance.id)
        return Outcome.completed({"ran_by": "handoff test"})


async def _instances(database_url: str, event_ids: list[str]) -> dict[str, dict[str, Any]]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT i.event_id, i.status, i.claimed_by, array_agg(l.kind ORDER BY l.position)"
            " FROM orchestrator.instances i JOIN orchestrator.instance_log l"
            " ON l.instance_id = i.id WHERE i.event_id = ANY(%s) GROUP BY i.id",
            (event_ids,),
        )
        return {
            row[0]: {"status": row[1], "claimed_by": row[2], "log": row[3]}
            for row in await cur.fetchall()
        }


def _records(tenant: Tenant, event_type: str, count: int) -> tuple[list[Record], list[str]]:
    ids = [str(uuid.uuid4()) for _ in range(count)]
    records = [
        Record(bus_topics.EVENTS, structured(tenant, event_type, {"n": n}, id=event_id), offset=n)
        for n, event_id in enumerate(ids)
    ]
    return records, ids


async def _handoff_setup(
    tenant: Tenant,
    receiver: Receiver,
    producer: AIOKafkaProducer,
    pool: Any,
    path: str,
    events: int,
    concurrency: int,
) -> tuple[Worker, RecordingSteps, list[Record], list[str]]:
    """A live webhook workflow, a worker whose loop is not started, and ``events`` records
    that start it."""
    _, event_type, _ = await live_webhook_workflow(tenant, receiver, producer, path)
    steps = RecordingSteps()
    worker = Worker(pool, cast(StepRunner, steps), concurrency=concurrency)
    records, ids = _records(tenant, event_type, events)
    return worker, steps, records, ids


@pytest.fixture
async def pool(database_url: str) -> Any:
    opened = await open_pool(database_url, max_size=4)
    yield opened
    await opened.close()


async def test_a_started_instance_runs_from_the_handoff_without_a_claim(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer, database_url: str, pool: Any
) -> None:
    worker, steps, records, ids = await _handoff_setup(
        tenant, receiver, producer, pool, "/handoff", events=2, concurrency=4
    )

    report = await Ingest(pool, worker).ingest(records)

    assert report.started == 2

    async def both_completed() -> bool:
        found = await _instances(database_url, ids)
        return len(found) == 2 and all(i["status"] == "completed" for i in found.values())

    await eventually(both_completed, "the handed-over instances to complete")
    found = await _instances(database_url, ids)
    for instance in found.values():
        # Started once, in the ingest's transaction; no claim wrote a second start.
        assert instance["log"] == [
            "instance_created",
            "step_started",
            "step_completed",
            "instance_completed",
        ]
        assert instance["claimed_by"] is None
    assert len(steps.ran) == 2
    await worker.stop()


async def test_only_as_many_as_the_worker_has_slots_for_are_claimed(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer, database_url: str, pool: Any
) -> None:
    _, event_type, _ = await live_webhook_workflow(tenant, receiver, producer, "/slots")
    gate = asyncio.Event()

    class HeldSteps(RecordingSteps):
        async def run(self, ctx: StepContext) -> Outcome:
            self.ran.append(ctx.instance.id)
            await gate.wait()
            return Outcome.completed({})

    steps = HeldSteps()
    worker = Worker(pool, cast(StepRunner, steps), concurrency=1)
    records, ids = _records(tenant, event_type, 3)

    await Ingest(pool, worker).ingest(records)

    await eventually(lambda: _true(len(steps.ran) == 1), "the one slot's instance to run")
    found = await _instances(database_url, ids)
    ours = [i for i in found.values() if i["claimed_by"] == worker.name]
    assert len(found) == 3 and len(ours) == 1
    # The two it had no room for are left to a claim (the stack's workers run them).
    others = [i for i in found.values() if i["claimed_by"] != worker.name]
    assert all(i["log"][:1] == ["instance_created"] for i in others)
    assert len(others) == 2
    gate.set()
    await eventually(
        lambda: _true(len(steps.ran) == 1 and not worker._tasks), "the slot to be given back"
    )
    assert not worker._slots.locked()
    await worker.stop()


async def test_an_instance_under_a_hold_is_not_handed_over(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer, database_url: str, pool: Any
) -> None:
    _, event_type, o = await live_webhook_workflow(
        tenant,
        receiver,
        producer,
        "/held-handoff",
        steps=[wf.Step(type="webhook", url=f"{receiver.url}/held-handoff")],
    )
    await o.instances.PauseInstances(
        inst.PauseInstancesRequest(scope=inst.InstanceScope(project_id=tenant.project)),
        metadata=o.md,
    )
    steps = RecordingSteps()
    worker = Worker(pool, cast(StepRunner, steps), concurrency=4)
    records, ids = _records(tenant, event_type, 1)
    try:
        await Ingest(pool, worker).ingest(records)

        async def paused() -> bool:
            found = await _instances(database_url, ids)
            return [i["status"] for i in found.values()] == ["paused"]

        # The stack's own worker claims it and holds it at the boundary.
        await eventually(paused, "the instance to be held")
        assert steps.ran == []
        assert not worker._slots.locked() and not worker._tasks
    finally:
        await o.instances.ResumeInstances(
            inst.ResumeInstancesRequest(scope=inst.InstanceScope(project_id=tenant.project)),
            metadata=o.md,
        )
        await worker.stop()


async def test_a_claim_that_fails_gives_the_reserved_slots_back(
    tenant: Tenant,
    receiver: Receiver,
    producer: AIOKafkaProducer,
    database_url: str,
    pool: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker, steps, records, ids = await _handoff_setup(
        tenant, receiver, producer, pool, "/claim-fails", events=2, concurrency=2
    )

    async def refused(*args: Any) -> Any:
        raise psycopg.errors.QueryCanceled("the claiming insert was canceled")

    monkeypatch.setattr(instance_store, "create_many", refused)
    with pytest.raises(psycopg.errors.QueryCanceled):
        await Ingest(pool, worker).ingest(records)

    assert not worker._slots.locked() and not worker._tasks and steps.ran == []
    assert await _instances(database_url, ids) == {}  # the batch's writes rolled back
    await worker.stop()


async def test_a_commit_that_fails_gives_the_claimed_slots_back(
    tenant: Tenant,
    receiver: Receiver,
    producer: AIOKafkaProducer,
    database_url: str,
    pool: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker, steps, records, ids = await _handoff_setup(
        tenant, receiver, producer, pool, "/commit-fails", events=2, concurrency=2
    )

    @asynccontextmanager
    async def failing_commit(opened: Any) -> AsyncIterator[Any]:
        async with transaction(opened) as conn:
            yield conn
            raise RuntimeError("the commit failed")  # rolls the real transaction back

    monkeypatch.setattr(ingest_module, "transaction", failing_commit)
    with pytest.raises(RuntimeError):
        await Ingest(pool, worker).ingest(records)

    assert not worker._slots.locked() and not worker._tasks and steps.ran == []
    assert await _instances(database_url, ids) == {}
    await worker.stop()


async def _true(value: bool) -> bool:
    return value


async def test_a_batch_is_stored_exactly_and_a_repeat_within_it_once(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer, database_url: str, pool: Any
) -> None:
    _, event_type, _ = await live_webhook_workflow(tenant, receiver, producer, "/exact")
    steps = RecordingSteps()
    worker = Worker(pool, cast(StepRunner, steps), concurrency=4)
    data = {"order": "o-1", "n": 2**70 + 1, "when": "2026-11-30T12:00:00Z", "nested": [{"q": 2}]}
    event_id = str(uuid.uuid4())
    record = structured(tenant, event_type, data, id=event_id)
    batch = [
        Record(bus_topics.EVENTS, record, offset=0),
        Record(bus_topics.EVENTS, record, offset=1),
    ]

    report = await Ingest(pool, worker).ingest(batch)

    assert (report.stored, report.duplicates, report.started) == (1, 1, 1)
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT data::text FROM orchestrator.events WHERE event_id = %s", (event_id,)
        )
        assert [json.loads(text) for (text,) in await cur.fetchall()] == [data]
    await eventually(lambda: _true(len(steps.ran) == 1), "the one instance to run")
    await worker.stop()
