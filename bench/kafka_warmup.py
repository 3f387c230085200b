"""Warm the benchmark's Kafka broker before any system is timed.

A JVM compiles its hot paths in the first tens of seconds of traffic. Measured on a
broker started moments earlier, eventflow's fixed-rate phase paid for that compilation:
the broker took 40-56% of a core there against ~20% once warm, on a 2-core machine where
every other process waits for it. A deployed broker has been up for days, and the peers
use no Kafka at all, so the harness sends the traffic eventflow's runs make (one small
record per produce request, fetched as it arrives) until the broker is past that.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid

from aiokafka import AIOKafkaProducer

from bench.e2e_bench import bench_consumer
from libs.bus import KafkaBus

SECONDS = 20.0
SENDERS = 4
RECORD = b"x" * 300
DRAIN_S = 15.0


async def warm(bootstrap: str, seconds: float = SECONDS) -> tuple[int, int]:
    """Produce single records from ``SENDERS`` tasks and consume them for ``seconds``;
    returns how many were sent and how many read back."""
    namespace = f"warmup{uuid.uuid4().hex[:8]}"
    await KafkaBus(bootstrap, namespace=namespace).ensure_topic("bench.warmup", partitions=4)
    topic = f"{namespace}.bench.warmup"
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    consumer = bench_consumer(bootstrap, topic, f"{namespace}.warmup")
    await producer.start()
    await consumer.start()
    deadline = time.monotonic() + seconds
    sent = received = 0

    async def send() -> None:
        nonlocal sent
        while time.monotonic() < deadline:
            await producer.send_and_wait(topic, RECORD)
            sent += 1

    async def consume() -> None:
        nonlocal received
        # Everything sent is read back (joining the group takes a moment), within a bound.
        while (time.monotonic() < deadline or received < sent) and (
            time.monotonic() < deadline + DRAIN_S
        ):
            batches = await consumer.getmany(timeout_ms=100)
            for partition, records in batches.items():
                received += len(records)
                await consumer.commit({partition: records[-1].offset + 1})

    try:
        print(f"[bench] warming the Kafka broker for {seconds:.0f} s", file=sys.stderr, flush=True)
        await asyncio.gather(consume(), *(send() for _ in range(SENDERS)))
    finally:
        await consumer.stop()
        await producer.stop()
    return sent, received
