"""docs/events.md cannot drift from the parser: its example records are parsed by it."""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.orchestrator.environments import SANDBOX_DISABLED
from services.orchestrator.events.cloudevents import (
    MAX_PAYLOAD_BYTES,
    MAX_RECORD_BYTES,
    IncomingEvent,
    Invalid,
    Reason,
    parse_record,
    partition_key,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "events.md"
# An HTML comment names the example; the fenced block after it is the record.
EXAMPLE = re.compile(r"<!-- record: (?P<name>[^>]+?) -->\n```text\n(?P<body>.*?)```", re.DOTALL)
# Reasons ingest adds once the record parsed: the tenant is checked against the registry.
TENANT_REASONS = {"UNKNOWN_TENANT", SANDBOX_DISABLED}


@dataclass(frozen=True)
class DocRecord:
    key: bytes
    headers: list[tuple[str, bytes]]
    value: bytes


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def examples() -> dict[str, DocRecord]:
    found = {m["name"]: read_record(m["body"]) for m in EXAMPLE.finditer(doc_text())}
    assert found, f"no `<!-- record: ... -->` examples in {DOC}"
    return found


def read_record(body: str) -> DocRecord:
    """``key: K``, ``headers:`` then indented ``name: value`` lines, ``value:`` then the rest."""
    head, _, value = body.partition("\nvalue:\n")
    key_line, headers_line, *header_lines = head.splitlines()
    assert key_line.startswith("key: ") and headers_line == "headers:", body
    headers = []
    for line in header_lines:
        name, _, text = line.strip().partition(": ")
        headers.append((name, text.encode()))
    value = textwrap.dedent(value).strip()  # the block's layout, not the record's bytes
    return DocRecord(key_line.removeprefix("key: ").encode(), headers, value.encode())


def parsed(name: str) -> IncomingEvent:
    record = examples()[name]
    event = parse_record(record.value, record.headers)
    assert isinstance(event, IncomingEvent), event
    return event


@pytest.mark.parametrize("mode", ["binary", "structured"])
def test_each_mode_example_is_the_documented_event_under_its_documented_key(mode: str) -> None:
    event = parsed(mode)
    assert (event.organization_id, event.project_id, event.environment) == (
        "acme",
        "web",
        "production",
    )
    assert (event.event_id, event.source, event.type, event.subject) == (
        "5f1c1a52-8d0e-4c4e-9a4b-2d7f0c3e9b11",
        "/signup/web",
        "user.signed_up",
        "u-1842",
    )
    assert event.time == datetime(2025, 6, 2, 9, 30, tzinfo=UTC)
    assert event.data == {"userId": "u-1842", "plan": "team", "email": "ada@example.com"}
    assert event.traceparent == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert examples()[mode].key == partition_key(event) == b"acme/web/u-1842"


def test_the_binary_and_structured_examples_are_the_same_event() -> None:
    binary, structured = parsed("binary"), parsed("structured")
    # Binary keeps the value verbatim; structured re-serializes `data` compactly.
    assert binary.data_json == examples()["binary"].value
    assert replace(binary, data_json=b"") == replace(structured, data_json=b"")


def test_the_invalid_example_is_refused_with_the_documented_reason_and_detail() -> None:
    record = examples()["invalid BAD_TYPE"]
    refused = parse_record(record.value, record.headers)
    assert isinstance(refused, Invalid)
    text = doc_text()
    documented = text[text.index("<!-- record: invalid BAD_TYPE -->") :]
    assert f"eventflow-reason: {refused.reason}\n" in documented
    assert f"eventflow-detail: {refused.detail}\n" in documented


def test_the_reason_table_lists_every_reason_ingest_can_give() -> None:
    table = re.findall(r"^\| `([A-Z_]+)` \| ", doc_text(), re.MULTILINE)
    assert sorted(table) == sorted({*Reason, *TENANT_REASONS})


def test_the_documented_size_limits_are_the_parsers() -> None:
    text = doc_text()
    assert MAX_PAYLOAD_BYTES == 1_048_576 and f"{MAX_PAYLOAD_BYTES:,} bytes" in text
    assert f"{MAX_RECORD_BYTES:,} bytes (1 MiB + 64 KiB)" in text


def test_an_example_with_an_impossible_date_is_refused() -> None:
    record = examples()["structured"]
    envelope = json.loads(record.value)
    envelope["time"] = "2025-02-30T00:00:00Z"
    refused = parse_record(json.dumps(envelope).encode(), record.headers)
    assert refused == Invalid("BAD_ATTRIBUTE", "attribute `time` must be an RFC 3339 timestamp")
