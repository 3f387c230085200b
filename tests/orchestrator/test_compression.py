"""Compressed batches: whatever codec a Kafka client picks, ingest reads it.

franz-go compresses with snappy by default, other clients with lz4 or zstd;
a codec ingest cannot decode would stall the consumer on that batch.
"""

from __future__ import annotations

import json

import pytest
from aiokafka import AIOKafkaProducer
from eventflow.registry.v1 import workflow_pb2 as wf

from libs.bus import topics as bus_topics
from tests.conftest import Tenant
from tests.orchestrator.conftest import (
    Orchestrated,
    Receiver,
    create_and_publish,
    structured,
    workflow_is_live,
)
from tests.orchestrator.test_end_to_end import trigger


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_a_compressed_batch_is_ingested(
    codec: str, tenant: Tenant, receiver: Receiver, producer: AIOKafkaProducer, kafka_bootstrap: str
) -> None:
    event_type = trigger()
    await create_and_publish(tenant, event_type, [wf.Step(type="webhook", url=f"{receiver.url}/c")])
    o = Orchestrated(tenant)
    await workflow_is_live(o, event_type, producer)
    compressed = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, compression_type=codec)
    await compressed.start()
    try:
        ids = []
        for n in range(3):
            value = structured(tenant, event_type, {"n": n, "codec": codec})
            await compressed.send(
                bus_topics.EVENTS,
                value=value,
                headers=[("content-type", b"application/cloudevents+json")],
            )
            ids.append(value)
        await compressed.flush()
    finally:
        await compressed.stop()
    for value in ids:
        [reaction] = await o.settled(json.loads(value)["id"])
        assert reaction.instance_status == "completed"
