"""The DLQ depth gauge: open dead letters per environment, from the real
tables of a database of its own (so the counts are exact)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from psycopg_pool import AsyncConnectionPool

from cli.stack import migrate
from libs.db import open_pool, transaction
from services.orchestrator.dlq_depth import DeadLetterDepth
from services.orchestrator.storage import dead_letters, instances
from services.orchestrator.storage import events as event_store
from services.orchestrator.storage.dead_letters import DeadLetterRow
from services.orchestrator.storage.events import EventRow
from tests.conftest import create_database
from tests.orchestrator.conftest import eventually


@pytest.fixture(scope="module")
async def pool(postgres_server: str) -> AsyncIterator[AsyncConnectionPool]:
    url = create_database(postgres_server)
    await migrate(url, ("orchestrator",))
    opened = await open_pool(url, max_size=2)
    yield opened
    await opened.close()


async def dead_letter(pool: AsyncConnectionPool, environment: str) -> DeadLetterRow:
    """An event, its failed instance, and the dead letter the worker writes for it."""
    event = EventRow(
        id=uuid.uuid4(),
        organization_id="org",
        project_id="main",
        environment=environment,
        event_id=str(uuid.uuid4()),
        type="orders.created",
        source="tests",
        subject=None,
        data={},
        time=None,
        replay_skip_side_effects=False,
        causation_id=None,
        correlation_id=None,
        depth=0,
    )
    workflow = uuid.uuid4()
    async with transaction(pool) as conn:
        await event_store.insert_new(conn, [event])
        instance = await instances.create(
            conn,
            organization_id="org",
            project_id="main",
            environment=environment,
            workflow_id=workflow,
            version=1,
            definition={"steps": []},
            event=event.id,
            event_id=event.event_id,
            subject=None,
            skip_side_effects=False,
        )
        return await dead_letters.insert(
            conn,
            organization_id="org",
            project_id="main",
            environment=environment,
            event=event.id,
            event_id=event.event_id,
            instance_id=instance,
            workflow_id=workflow,
            workflow_version=1,
            step=0,
            step_name="score",
            attempts=1,
            reason="TRAP",
            error="guest trapped",
        )


def depth(reader: InMemoryMetricReader) -> dict[str, int]:
    data = reader.get_metrics_data()
    found: dict[str, int] = {}
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in (m for m in scope.metrics if m.name == "eventflow.dlq.depth"):
                assert metric.unit == "{dead_letter}"
                for point in metric.data.data_points:
                    assert isinstance(point, NumberDataPoint)
                    found[str((point.attributes or {})["environment"])] = int(point.value)
    return found


async def test_the_gauge_reports_open_dead_letters_per_environment_as_last_counted(
    pool: AsyncConnectionPool,
) -> None:
    reader = InMemoryMetricReader()
    gauge = DeadLetterDepth(pool, meter=MeterProvider(metric_readers=[reader]).get_meter("t"))
    assert depth(reader) == {}, "nothing is reported before the first count"

    assert await gauge.refresh() == {"production": 0, "sandbox": 0}
    assert depth(reader) == {"production": 0, "sandbox": 0}

    first = await dead_letter(pool, "production")
    await dead_letter(pool, "production")
    await dead_letter(pool, "sandbox")
    assert depth(reader) == {"production": 0, "sandbox": 0}, "a reading is the last count"
    await gauge.refresh()
    assert depth(reader) == {"production": 2, "sandbox": 1}

    async with transaction(pool) as conn:
        await dead_letters.set_status(conn, first.id, "discarded")
    await gauge.refresh()
    assert depth(reader) == {"production": 1, "sandbox": 1}


async def test_the_running_gauge_counts_at_start_and_keeps_its_last_count_when_counts_fail(
    postgres_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = create_database(postgres_server)
    await migrate(url, ("orchestrator",))
    own = await open_pool(url, max_size=1)
    reader = InMemoryMetricReader()
    gauge = DeadLetterDepth(
        own, interval_s=0.05, meter=MeterProvider(metric_readers=[reader]).get_meter("t")
    )
    await dead_letter(own, "sandbox")

    async def counted() -> bool:
        return bool(depth(reader))

    gauge.start()
    try:
        await eventually(counted, "a first count")
        assert depth(reader) == {"production": 0, "sandbox": 1}

        await own.close()  # every later count fails

        async def failed_twice() -> bool:
            failures = [r for r in caplog.records if "DLQ depth is stale" in r.getMessage()]
            return len(failures) >= 2  # it keeps trying

        await eventually(failed_twice, "failed counts")
        assert depth(reader) == {"production": 0, "sandbox": 1}
    finally:
        await gauge.stop()
