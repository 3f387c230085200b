"""The orchestrator's rules, each against the real stack (SPEC §3, §7)."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import psycopg
from aiokafka import AIOKafkaProducer
from eventflow.orchestrator.v1 import event_pb2
from eventflow.orchestrator.v1 import event_service_pb2 as ev
from eventflow.orchestrator.v1 import instance_service_pb2 as inst
from eventflow.registry.v1 import workflow_pb2 as wf
from eventflow.registry.v1 import workflow_service_pb2 as wf_api
from google.protobuf.field_mask_pb2 import FieldMask

from libs.bus import topics as bus_topics
from tests.conftest import Tenant, make_tenant
from tests.governance.conftest import ActionsClient
from tests.governance.modules import constant, wasm
from tests.integration.helpers import rpc_error, violation_fields
from tests.orchestrator.conftest import (
    Orchestrated,
    Receiver,
    create_and_publish,
    eventually,
    send_structured,
    structured,
    workflow_is_live,
)
from tests.orchestrator.test_end_to_end import approved_echo, trigger


async def live_webhook_workflow(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer, path: str, **kw: object
) -> tuple[str, str, Orchestrated]:
    event_type = trigger()
    steps = kw.pop("steps", None) or [wf.Step(type="webhook", url=f"{receiver.url}{path}")]
    workflow_id, secret = await create_and_publish(tenant, event_type, steps, **kw)  # type: ignore[arg-type]
    receiver.secrets[path] = secret
    o = Orchestrated(tenant)
    await workflow_is_live(o, event_type, producer)
    return workflow_id, event_type, o


async def test_a_binary_mode_event_starts_the_workflow(
    tenant: Tenant, producer: AIOKafkaProducer
) -> None:
    action = await approved_echo(tenant)
    event_type = trigger()
    await create_and_publish(tenant, event_type, [wf.Step(type="custom_action", action=action)])
    o = Orchestrated(tenant)
    await workflow_is_live(o, event_type, producer)
    event_id = str(uuid.uuid4())
    headers = [
        ("ce_specversion", b"1.0"),
        ("ce_id", event_id.encode()),
        ("ce_source", b"tests"),
        ("ce_type", event_type.encode()),
        ("ce_orgid", tenant.org.encode()),
        ("ce_projectid", tenant.project.encode()),
        ("content-type", b"application/json"),
    ]
    await producer.send_and_wait(bus_topics.EVENTS, value=b'{"userId": "u-1"}', headers=headers)
    [reaction] = await o.settled(event_id)
    assert reaction.instance_status == "completed"
    payload = json.loads(reaction.steps[0].output_json)["data"]["payload"]
    assert payload == {"userId": "u-1"}


async def test_grpc_publish_is_ingested_like_kafka_and_validated(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    _, event_type, o = await live_webhook_workflow(tenant, receiver, producer, "/grpc")
    published = await o.events.Publish(
        ev.PublishRequest(
            event=event_pb2.EventInput(
                type=event_type, project_id=tenant.project, data_json='{"a": 1}'
            )
        ),
        metadata=o.md,
    )
    [reaction] = await o.settled(published.event_id)
    assert reaction.instance_status == "completed"
    stored = await o.events.GetEvent(
        ev.GetEventRequest(id=published.event_id, project_id=tenant.project), metadata=o.md
    )
    assert json.loads(stored.event.data_json) == {"a": 1} and stored.event.source == "grpc"
    error = await rpc_error(
        o.events.PublishBatch(
            ev.PublishBatchRequest(
                events=[
                    event_pb2.EventInput(type=event_type, project_id=tenant.project),
                    event_pb2.EventInput(type="Bad Type", project_id=tenant.project),
                    event_pb2.EventInput(
                        type=event_type, project_id=tenant.project, data_json="[1]"
                    ),
                ]
            ),
            metadata=o.md,
        )
    )
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert violation_fields(error) == ["events[1].type", "events[2].data_json"]
    error = await rpc_error(
        o.events.Publish(
            ev.PublishRequest(
                event=event_pb2.EventInput(type=event_type, project_id=tenant.project)
            ),
            metadata=tenant.metadata("viewer"),
        )
    )
    assert error.reason == "ROLE_TOO_LOW"


async def test_sandbox_publishing_needs_a_sandbox_plan(
    channel: grpc.aio.Channel, operator_token: str
) -> None:
    starter = await make_tenant(channel, operator_token, plan="starter")
    o = Orchestrated(starter)
    request = ev.PublishRequest(
        event=event_pb2.EventInput(type="a.b", project_id=starter.project, environment="sandbox")
    )

    async def refused() -> bool:
        error = await rpc_error(o.events.Publish(request, metadata=o.md))
        return error.reason == "SANDBOX_DISABLED"

    await eventually(refused, "the tenant to reach the orchestrator")


async def test_a_redelivered_event_is_stored_and_reacted_to_once(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    _, event_type, o = await live_webhook_workflow(tenant, receiver, producer, "/dup")
    event_id = str(uuid.uuid4())
    for _ in range(3):
        await send_structured(producer, tenant, event_type, {"n": 1}, id=event_id)
    await o.settled(event_id)
    await asyncio.sleep(1)
    assert len(await o.reactions(event_id)) == 1
    assert len([d for d in receiver.at("/dup") if d.body["id"] == event_id]) == 1


async def test_malformed_records_are_quarantined_and_ingest_goes_on(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer, database_url: str
) -> None:
    _, event_type, o = await live_webhook_workflow(tenant, receiver, producer, "/after")
    marker = uuid.uuid4().hex
    bad = {
        "BAD_JSON": b"{not json " + marker.encode(),
        "MISSING_ATTRIBUTE": json.dumps(
            {
                "specversion": "1.0",
                "id": marker,
                "type": "x.y",
                "orgid": tenant.org,
                "projectid": tenant.project,
            }
        ).encode(),
        "UNKNOWN_TENANT": structured(tenant, event_type, {"m": marker}, projectid="nope"),
        "PAYLOAD_TOO_LARGE": structured(
            tenant, event_type, {"m": marker, "blob": "x" * (1024 * 1024)}
        ),
    }
    for value in bad.values():
        await producer.send_and_wait(
            bus_topics.EVENTS,
            value=value,
            headers=[("content-type", b"application/cloudevents+json")],
        )
    good = await send_structured(producer, tenant, event_type, {"after": True})
    [reaction] = await o.settled(good)
    assert reaction.instance_status == "completed"

    async def quarantined() -> dict[str, int]:
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            cur = await conn.execute(
                "SELECT reason, count(*) FROM orchestrator.quarantine"
                " WHERE position(%s::bytea in value) > 0 GROUP BY reason",
                (marker.encode(),),
            )
            return {row[0]: row[1] for row in await cur.fetchall()}

    async def all_kept() -> bool:
        return await quarantined() == {reason: 1 for reason in bad}

    await eventually(all_kept, "every malformed record in the quarantine")


async def test_once_allows_exactly_one_instance_per_subject_under_concurrency(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer, stack: object, database_url: str
) -> None:
    from libs.bus import Record
    from libs.db import open_pool
    from services.orchestrator.events.ingest import Ingest

    workflow_id, event_type, _ = await live_webhook_workflow(
        tenant, receiver, producer, "/once", reentry=wf.Reentry(mode="once")
    )
    # Two ingesters with their own connection pools stand for two orchestrator
    # processes; each handles half of 20 concurrent events for one subject.
    pools = [await open_pool(database_url, max_size=4) for _ in range(2)]
    ingesters = [Ingest(pool) for pool in pools]
    subject = f"user-{uuid.uuid4().hex[:6]}"
    records = [
        Record(
            bus_topics.EVENTS, structured(tenant, event_type, {"userId": subject, "n": n}), offset=n
        )
        for n in range(20)
    ]
    await asyncio.gather(*(ingesters[n % 2].ingest([record]) for n, record in enumerate(records)))
    for pool in pools:
        await pool.close()
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM orchestrator.instances WHERE workflow_id = %s AND subject = %s",
            (uuid.UUID(workflow_id), subject),
        )
        row = await cur.fetchone()
    assert row is not None and row[0] == 1


async def test_cooldown_blocks_a_second_start_and_always_does_not(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    _, cooling, o = await live_webhook_workflow(
        tenant, receiver, producer, "/cool", reentry=wf.Reentry(mode="cooldown", cooldown_minutes=5)
    )
    first = await send_structured(producer, tenant, cooling, {"email": "a@example.com"})
    await o.settled(first)
    second = await send_structured(producer, tenant, cooling, {"email": "a@example.com"})
    other = await send_structured(producer, tenant, cooling, {"email": "b@example.com"})
    await o.settled(other)
    await asyncio.sleep(0.5)
    assert await o.reactions(second) == []
    _, always, _ = await live_webhook_workflow(tenant, receiver, producer, "/always")
    for _ in range(2):
        event_id = await send_structured(producer, tenant, always, {"email": "a@example.com"})
        await o.settled(event_id)


async def test_once_ignores_failed_instances(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    _, event_type, o = await live_webhook_workflow(
        tenant, receiver, producer, "/flaky-once", reentry=wf.Reentry(mode="once")
    )
    receiver.script["/flaky-once"] = [404]
    failed = await send_structured(producer, tenant, event_type, {"userId": "u-once"})
    [reaction] = await o.settled(failed)
    assert reaction.instance_status == "failed"
    retried = await send_structured(producer, tenant, event_type, {"userId": "u-once"})
    [again] = await o.settled(retried)
    assert again.instance_status == "completed"
    blocked = await send_structured(producer, tenant, event_type, {"userId": "u-once"})
    await asyncio.sleep(1)
    assert await o.reactions(blocked) == []


async def test_failed_attempts_retry_on_a_durable_backoff_timeline(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    steps = [
        wf.Step(
            type="webhook",
            url=f"{receiver.url}/retry",
            retry=wf.RetryPolicy(max_attempts=4, backoff="fixed", backoff_delay_ms=1000),
        )
    ]
    _, event_type, o = await live_webhook_workflow(
        tenant, receiver, producer, "/retry", steps=steps
    )
    receiver.script["/retry"] = [500, 503]
    event_id = await send_structured(producer, tenant, event_type, {"x": 1})
    [reaction] = await o.settled(event_id)
    assert reaction.instance_status == "completed" and reaction.steps[0].attempts == 3
    log = await o.log(reaction.instance_id)
    kinds = [e.kind for e in log]
    assert kinds == [
        "instance_created",
        "step_started",
        "step_retrying",
        "step_started",
        "step_retrying",
        "step_started",
        "step_completed",
        "instance_completed",
    ]
    starts = [e.time.ToDatetime() for e in log if e.kind == "step_started"]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(starts)]
    assert all(gap >= 0.75 for gap in gaps), gaps  # 1 s fixed backoff, -20% jitter at most
    deliveries = [d for d in receiver.at("/retry") if d.body["id"] == event_id]
    assert len({d.headers["webhook-id"] for d in deliveries}) == 1 and len(deliveries) == 3


async def test_a_final_failure_goes_to_the_dlq_and_redrive_finishes_it(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    workflow_id, event_type, o = await live_webhook_workflow(tenant, receiver, producer, "/gone")
    receiver.script["/gone"] = [404]
    event_id = await send_structured(producer, tenant, event_type, {"x": 1})
    [reaction] = await o.settled(event_id)
    assert reaction.instance_status == "failed" and "404" in reaction.steps[0].error
    letters = await o.dead_letters.ListDeadLetters(
        inst.ListDeadLettersRequest(project_id=tenant.project, workflow_id=workflow_id),
        metadata=o.md,
    )
    [letter] = letters.dead_letters
    assert (letter.reason, letter.attempts, letter.event_id, letter.status) == (
        "WEBHOOK_FAILED",
        1,
        event_id,
        "open",
    )
    window = inst.ListDeadLettersRequest(project_id=tenant.project, workflow_id=workflow_id)
    window.create_after.FromDatetime(datetime.now(UTC) + timedelta(minutes=1))
    later = await o.dead_letters.ListDeadLetters(window, metadata=o.md)
    assert list(later.dead_letters) == []
    redriven = await o.dead_letters.RedriveDeadLetter(
        inst.RedriveDeadLetterRequest(id=letter.id), metadata=o.md
    )
    again = await o.dead_letters.RedriveDeadLetter(
        inst.RedriveDeadLetterRequest(id=letter.id), metadata=o.md
    )
    assert redriven.instance_id == again.instance_id  # idempotent
    reactions = await o.settled(event_id, count=2)
    assert sorted(r.instance_status for r in reactions) == ["completed", "failed"]
    error = await rpc_error(
        o.dead_letters.DiscardDeadLetter(inst.DiscardDeadLetterRequest(id=letter.id), metadata=o.md)
    )
    assert error.reason == "DEAD_LETTER_REDRIVEN"


async def test_a_guest_failure_fails_at_once_with_its_reason_in_the_reactions(
    tenant: Tenant, producer: AIOKafkaProducer
) -> None:
    actions = ActionsClient(tenant)
    name = f"bad-{uuid.uuid4().hex[:6]}"
    await actions.upload(name, wasm(constant({"projection": {"name": "x", "entity_type": "t"}})))
    await actions.review(name, 1)
    event_type = trigger()
    workflow_id, _ = await create_and_publish(
        tenant, event_type, [wf.Step(type="custom_action", action=name)]
    )
    o = Orchestrated(tenant)
    await workflow_is_live(o, event_type, producer)
    event_id = await send_structured(producer, tenant, event_type, {})
    [reaction] = await o.settled(event_id)
    step = reaction.steps[0]
    assert (reaction.instance_status, step.status, step.attempts) == ("failed", "failed", 1)
    assert "projection.entity_id" in step.error
    letters = await o.dead_letters.ListDeadLetters(
        inst.ListDeadLettersRequest(workflow_id=workflow_id, project_id=tenant.project),
        metadata=o.md,
    )
    [letter] = [d for d in letters.dead_letters if d.event_id == event_id]
    assert letter.reason == "INVALID_OUTPUT"
    discarded = await o.dead_letters.DiscardDeadLetter(
        inst.DiscardDeadLetterRequest(id=letter.id), metadata=o.md
    )
    assert discarded.dead_letter.status == "discarded"


async def test_a_delay_is_a_durable_timer(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    steps = [
        wf.Step(type="delay", duration_ms=1500),
        wf.Step(type="webhook", url=f"{receiver.url}/later"),
    ]
    _, event_type, o = await live_webhook_workflow(
        tenant, receiver, producer, "/later", steps=steps
    )
    event_id = await send_structured(producer, tenant, event_type, {})
    [reaction] = await o.settled(event_id)
    log = await o.log(reaction.instance_id)
    kinds = [e.kind for e in log]
    assert kinds[:5] == [
        "instance_created",
        "step_started",
        "wait_created",
        "wait_completed",
        "step_completed",
    ]
    created = next(e.time.ToDatetime() for e in log if e.kind == "wait_created")
    fired = next(e.time.ToDatetime() for e in log if e.kind == "wait_completed")
    assert (fired - created).total_seconds() >= 1.5
    until = datetime.fromisoformat(json.loads(log[2].detail_json)["until"])
    assert until.tzinfo is not None


async def test_environments_are_partitioned_and_paused_workflows_start_nothing(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer
) -> None:
    workflow_id, event_type, o = await live_webhook_workflow(tenant, receiver, producer, "/prod")
    sandbox = await send_structured(producer, tenant, event_type, {}, environment="sandbox")
    await asyncio.sleep(1)
    assert await o.reactions(sandbox, env="sandbox") == []
    await tenant.workflows.DisableWorkflow(
        wf_api.DisableWorkflowRequest(id=workflow_id), metadata=tenant.metadata("developer")
    )

    async def paused() -> bool:
        event_id = await send_structured(producer, tenant, event_type, {})
        await asyncio.sleep(0.5)
        return await o.reactions(event_id) == []

    await eventually(paused, "the disable to reach the orchestrator")
    await tenant.workflows.UpdateWorkflow(
        wf_api.UpdateWorkflowRequest(
            workflow=wf.Workflow(id=workflow_id, name="renamed"),
            update_mask=FieldMask(paths=["name"]),
        ),
        metadata=tenant.metadata("developer"),
    )
    after = await send_structured(producer, tenant, event_type, {})
    await asyncio.sleep(0.5)
    assert await o.reactions(after) == []


async def test_claims_of_a_dead_worker_on_this_host_are_released_at_start(
    tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer, stack: Any, database_url: str
) -> None:
    steps = [wf.Step(type="delay", duration_ms=30 * 24 * 3600 * 1000)]
    _, event_type, o = await live_webhook_workflow(
        tenant, receiver, producer, "/never", steps=steps
    )
    event_id = await send_structured(producer, tenant, event_type, {})
    [reaction] = await o.settled(event_id, statuses=("running",))
    dead = f"{socket.gethostname()}:999999:gone"  # no such pid
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "UPDATE orchestrator.instances SET claimed_by = %s, claim_expires = now() + interval"
            " '1 hour' WHERE id = %s",
            (dead, uuid.UUID(reaction.instance_id)),
        )
    assert await stack.orchestrator.worker.release_orphans() >= 1
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT claimed_by FROM orchestrator.instances WHERE id = %s",
            (uuid.UUID(reaction.instance_id),),
        )
        assert await cur.fetchone() == (None,)
