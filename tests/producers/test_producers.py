"""The Python and Go producer examples against the real broker and stack (docs/events.md)."""

from __future__ import annotations

import json
import uuid

import grpc
import pytest
from eventflow.orchestrator.v1 import event_service_pb2 as ev

from libs.bus import topics as bus_topics
from services.orchestrator.events.cloudevents import IncomingEvent, parse_record, partition_key
from tests.integration.helpers import rpc_error
from tests.producers.conftest import ExampleProducer, Live, find_invalid, record_at

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize("mode", ["binary", "structured"])
async def test_an_example_event_is_stored_with_its_attributes_and_starts_the_workflow(
    example_producer: ExampleProducer, live: Live, mode: str
) -> None:
    subject = f"u-{uuid.uuid4().hex[:8]}"
    data = {"userId": subject, "plan": "team", "seats": 3}
    sent = await example_producer.send(
        mode=mode,
        org=live.tenant.org,
        project=live.tenant.project,
        type=live.event_type,
        subject=subject,
        data=json.dumps(data),
        traceparent=TRACEPARENT,
    )
    assert sent.key == f"{live.tenant.org}/{live.tenant.project}/{subject}"

    record = await record_at(
        example_producer.bootstrap, bus_topics.EVENTS, sent.partition, sent.offset
    )
    event = parse_record(record.value, record.headers)
    assert isinstance(event, IncomingEvent), event
    assert record.key == partition_key(event) == sent.key.encode()
    assert event.traceparent == TRACEPARENT
    names = {name for name, _ in record.headers}
    if mode == "binary":
        assert {"ce_id", "ce_type", "ce_orgid", "ce_projectid"} <= names
        assert json.loads(record.value) == data
    else:
        assert not any(name.startswith("ce_") for name in names)
        assert dict(record.headers)["content-type"].startswith(b"application/cloudevents+json")

    o = live.orchestrated
    [reaction] = await o.settled(sent.id)
    assert reaction.instance_status == "completed"
    assert [(s.name, s.status) for s in reaction.steps] == [("notify", "completed")]
    stored = (
        await o.events.GetEvent(
            ev.GetEventRequest(id=sent.id, project_id=live.tenant.project), metadata=o.md
        )
    ).event
    assert (stored.organization_id, stored.project_id, stored.environment) == (
        live.tenant.org,
        live.tenant.project,
        "production",
    )
    assert (stored.type, stored.source, stored.subject) == (
        live.event_type,
        example_producer.source,
        subject,
    )
    assert json.loads(stored.data_json) == data
    assert stored.HasField("time") and not stored.replay_skip_side_effects
    [delivery] = live.deliveries_of(sent.id)
    assert delivery.verified and delivery.body["data"] == data


async def test_the_same_id_sent_twice_is_one_event_and_one_reaction(
    example_producer: ExampleProducer, live: Live
) -> None:
    subject = f"u-{uuid.uuid4().hex[:8]}"
    event_id = str(uuid.uuid4())
    common = {
        "org": live.tenant.org,
        "project": live.tenant.project,
        "type": live.event_type,
        "subject": subject,
    }
    first = await example_producer.send(id=event_id, data='{"attempt": 1}', **common)
    again = await example_producer.send(id=event_id, data='{"attempt": 2}', **common)
    # A later event about the same subject: one key, one partition, read after the repeat.
    after = await example_producer.send(data='{"attempt": 3}', **common)
    assert first.key == again.key == after.key
    assert first.partition == again.partition == after.partition
    assert first.offset < again.offset < after.offset

    o = live.orchestrated
    await o.settled(after.id)
    # Ingest has read past the repeat, so it has already made of it all it ever will.
    assert len(await o.reactions(event_id)) == 1
    stored = await o.events.GetEvent(
        ev.GetEventRequest(id=event_id, project_id=live.tenant.project), metadata=o.md
    )
    assert json.loads(stored.event.data_json) == {"attempt": 1}, "the first record wins"
    assert len(live.deliveries_of(event_id)) == 1


@pytest.mark.parametrize(
    ("flag", "value", "reason", "named"),
    [
        ("type", "User.SignedUp", "BAD_TYPE", "attribute `type`"),
        ("project", "no-such-project", "UNKNOWN_TENANT", "no-such-project"),
    ],
)
async def test_a_bad_record_reaches_the_invalid_topic_with_its_reason(
    example_producer: ExampleProducer, live: Live, flag: str, value: str, reason: str, named: str
) -> None:
    flags = {
        "org": live.tenant.org,
        "project": live.tenant.project,
        "type": live.event_type,
        "data": '{"userId": "u-bad"}',
        flag: value,
    }
    sent = await example_producer.send(**flags)

    invalid = await find_invalid(example_producer.bootstrap, sent)
    headers = dict(invalid.headers)
    assert headers["eventflow-reason"].decode() == reason
    assert named in headers["eventflow-detail"].decode()
    original = await record_at(
        example_producer.bootstrap, bus_topics.EVENTS, sent.partition, sent.offset
    )
    assert (invalid.key, invalid.value) == (original.key, original.value)
    assert invalid.key == sent.key.encode()
    o = live.orchestrated
    error = await rpc_error(
        o.events.GetEvent(
            ev.GetEventRequest(id=sent.id, project_id=live.tenant.project), metadata=o.md
        )
    )
    assert error.code == grpc.StatusCode.NOT_FOUND, "a refused record is not an event"
