"""Write one CloudEvent to eventflow's Kafka topic with aiokafka (docs/events.md).

CloudEvents 1.0 in binary mode (``ce_`` headers, the data as the record value) or structured
mode (the whole event as one JSON object), the tenant in the ``orgid``/``projectid``
extensions, and the record key ``<orgid>/<projectid>/<subject>`` so that one subject's
events stay in order on one partition::

    python produce.py --brokers 127.0.0.1:9092 --org acme --project web \\
        --type user.signed_up --data '{"userId": "u-1"}'

Prints ``{"id": ..., "key": ..., "partition": ..., "offset": ...}`` on success. Needs only
``aiokafka`` (``pip install aiokafka``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import uuid
from datetime import UTC, datetime
from typing import Any

from aiokafka import AIOKafkaProducer

# The data fields eventflow keys by when an event has no subject.
SUBJECT_FIELDS = ("audienceId", "userId", "actorId", "targetUserId", "email")
_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")


def attributes(args: argparse.Namespace, event_id: str) -> dict[str, str]:
    """The CloudEvents context attributes and eventflow's extensions."""
    attrs = {
        "specversion": "1.0",
        "id": event_id,
        "source": args.source,
        "type": args.type,
        "time": datetime.now(UTC).isoformat(),
        "orgid": args.org,
        "projectid": args.project,
        "environment": args.environment,
    }
    if args.subject:
        attrs["subject"] = args.subject
    return attrs


def record_key(attrs: dict[str, str], data: dict[str, Any]) -> bytes:
    """``<orgid>/<projectid>/<who>``: the subject, else the first subject field of the data,
    else the event id -- the key eventflow's own Publish uses."""
    who = attrs.get("subject") or next(
        (text for name in SUBJECT_FIELDS if (text := _subject_text(data.get(name)))),
        attrs["id"],
    )
    return f"{attrs['orgid']}/{attrs['projectid']}/{who}".encode()


def _subject_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return ""


def encode(
    mode: str, attrs: dict[str, str], data_json: bytes
) -> tuple[bytes, list[tuple[str, bytes]]]:
    """(value, headers) of the record in ``mode``."""
    if mode == "binary":
        headers = [(f"ce_{name}", text.encode()) for name, text in attrs.items()]
        headers.append(("content-type", b"application/json"))
        return data_json, headers
    envelope = {**attrs, "datacontenttype": "application/json", "data": json.loads(data_json)}
    value = json.dumps(envelope, ensure_ascii=False, separators=(",", ":")).encode()
    return value, [("content-type", b"application/cloudevents+json; charset=utf-8")]


async def produce(args: argparse.Namespace) -> dict[str, Any]:
    data_json = args.data.encode()
    data = json.loads(data_json)
    if not isinstance(data, dict):
        raise ValueError("--data must be a JSON object")
    attrs = attributes(args, args.id or str(uuid.uuid4()))
    key = record_key(attrs, data)
    value, headers = encode(args.mode, attrs, data_json)
    if args.traceparent:
        headers.append(("traceparent", args.traceparent.encode()))
    producer = AIOKafkaProducer(
        bootstrap_servers=args.brokers,
        # A retried send is written once; acks from all in-sync replicas.
        enable_idempotence=True,
        acks="all",
        max_request_size=2 * 1024 * 1024,  # up to 1 MiB of data plus the envelope
    )
    await producer.start()
    try:
        sent = await producer.send_and_wait(args.topic, value=value, key=key, headers=headers)
    finally:
        await producer.stop()
    return {
        "id": attrs["id"],
        "key": key.decode(),
        "partition": sent.partition,
        "offset": sent.offset,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    bootstrap = os.environ.get("EVENTFLOW_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
    parser.add_argument("--brokers", default=bootstrap, help="Kafka bootstrap servers")
    parser.add_argument("--topic", default="eventflow.events")
    parser.add_argument("--mode", choices=("binary", "structured"), default="binary")
    parser.add_argument("--id", default="", help="default: a random UUID; re-sending is a no-op")
    parser.add_argument("--source", default="examples/producers/python")
    parser.add_argument("--type", required=True, help="e.g. user.signed_up")
    parser.add_argument("--org", required=True, help="organization id (orgid)")
    parser.add_argument("--project", required=True, help="project id (projectid)")
    parser.add_argument("--environment", default="production", help="production or sandbox")
    parser.add_argument("--subject", default="")
    parser.add_argument("--data", default="{}", help="the payload, a JSON object")
    parser.add_argument("--traceparent", default="", help="sent as the traceparent header")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        result = asyncio.run(produce(args))
    except ValueError as error:  # json.JSONDecodeError included
        print(f"produce: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
