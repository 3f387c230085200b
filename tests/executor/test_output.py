"""The output contract (SPEC §6), checked on raw documents without a guest."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.executor.sandbox.output import MAX_DEPTH, parse_output
from services.executor.sandbox.result import (
    ActionOutput,
    DerivedEvent,
    Failure,
    FailureReason,
    Projection,
)


def ok(document: Any) -> ActionOutput:
    outcome = parse_output(json.dumps(document).encode())
    assert isinstance(outcome, ActionOutput), outcome
    return outcome


def invalid(raw: bytes | Any) -> str:
    data = raw if isinstance(raw, bytes) else json.dumps(raw).encode()
    outcome = parse_output(data)
    assert isinstance(outcome, Failure), outcome
    assert outcome.reason is FailureReason.INVALID_OUTPUT
    return outcome.message


def test_ordinary_keys_are_data() -> None:
    out = ok({"score": 7, "tags": ["a"], "nested": {"x": None}})
    assert out.data == {"score": 7, "tags": ["a"], "nested": {"x": None}}
    assert out.projection is None and out.derived_event is None


def test_empty_object_is_valid() -> None:
    assert ok({}).data == {}


def test_projection_with_both_entity_keys_is_an_upsert() -> None:
    out = ok(
        {
            "projection": {
                "name": "orders.risk",
                "entity_type": "order",
                "entity_id": "o-1",
                "title": "Order o-1",
                "status": "flagged",
                "data": {"score": 91},
            },
            "risk": 91,
        }
    )
    assert out.projection == Projection(
        "orders.risk", "order", "o-1", "Order o-1", "flagged", {"score": 91}
    )
    assert out.projection.keyed
    assert out.data == {"risk": 91}  # reserved keys are not data


def test_projection_without_entity_keys_appends() -> None:
    out = ok({"projection": {"name": "audit_log", "data": [1, 2]}})
    assert out.projection == Projection("audit_log", data=[1, 2])
    assert not out.projection.keyed


def test_numeric_entity_id_is_kept_as_its_json_text() -> None:
    out = ok({"projection": {"name": "p", "entity_type": "t", "entity_id": 42}})
    assert out.projection is not None and out.projection.entity_id == "42"
    out = ok({"projection": {"name": "p", "entity_type": "t", "entity_id": 1.5}})
    assert out.projection is not None and out.projection.entity_id == "1.5"


@pytest.mark.parametrize(
    ("projection", "field"),
    [
        ({"name": "p", "entity_type": "order"}, "projection.entity_id"),
        ({"name": "p", "entity_id": "o-1"}, "projection.entity_type"),
        ({"name": "p", "entity_type": "order", "entity_id": None}, "projection.entity_id"),
    ],
)
def test_one_half_of_the_entity_key_names_the_missing_field(
    projection: dict[str, Any], field: str
) -> None:
    message = invalid({"projection": projection})
    assert message.startswith(f"{field}: missing")


@pytest.mark.parametrize(
    ("projection", "field"),
    [
        ("not an object", "projection"),
        ([], "projection"),
        (None, "projection"),
        ({}, "projection.name"),
        ({"name": ""}, "projection.name"),
        ({"name": "Upper"}, "projection.name"),
        ({"name": "has space"}, "projection.name"),
        ({"name": "x" * 121}, "projection.name"),
        ({"name": 5}, "projection.name"),
        ({"name": "p", "entity_type": "Order", "entity_id": "1"}, "projection.entity_type"),
        ({"name": "p", "entity_type": "t" * 65, "entity_id": "1"}, "projection.entity_type"),
        ({"name": "p", "entity_type": "t", "entity_id": "i" * 201}, "projection.entity_id"),
        ({"name": "p", "entity_type": "t", "entity_id": ""}, "projection.entity_id"),
        ({"name": "p", "entity_type": "t", "entity_id": True}, "projection.entity_id"),
        ({"name": "p", "entity_type": "t", "entity_id": {"id": 1}}, "projection.entity_id"),
        ({"name": "p", "title": "t" * 201}, "projection.title"),
        ({"name": "p", "title": 3}, "projection.title"),
        ({"name": "p", "status": "s" * 41}, "projection.status"),
        ({"name": "p", "status": ["open"]}, "projection.status"),
        ({"name": "p", "entityId": "1"}, "projection.entityId"),
    ],
)
def test_projection_of_the_wrong_shape_names_the_field(projection: Any, field: str) -> None:
    message = invalid({"projection": projection})
    assert message.startswith(f"{field}:"), message


def test_projection_limits_are_inclusive() -> None:
    out = ok(
        {
            "projection": {
                "name": "n" * 120,
                "entity_type": "t" * 64,
                "entity_id": "i" * 200,
                "title": "é" * 200,  # characters, not bytes
                "status": "s" * 40,
            }
        }
    )
    assert out.projection is not None and out.projection.keyed


def test_derived_event_object() -> None:
    out = ok({"derived_event": {"type": "order.flagged", "payload": {"id": "o-1"}}})
    assert out.derived_event == DerivedEvent("order.flagged", {"id": "o-1"})
    assert out.data == {}


def test_derived_event_false_suppresses() -> None:
    out = ok({"derived_event": False, "x": 1})
    assert out.derived_event is None
    assert out.data == {"x": 1}


@pytest.mark.parametrize(
    ("event", "field"),
    [
        (True, "derived_event"),
        (None, "derived_event"),
        ("order.flagged", "derived_event"),
        ({"payload": {}}, "derived_event.type"),
        ({"type": "Order.Flagged", "payload": {}}, "derived_event.type"),
        ({"type": "e" * 121, "payload": {}}, "derived_event.type"),
        ({"type": "", "payload": {}}, "derived_event.type"),
        ({"type": "ok"}, "derived_event.payload"),
        ({"type": "ok", "payload": [1]}, "derived_event.payload"),
        ({"type": "ok", "payload": "{}"}, "derived_event.payload"),
        ({"type": "ok", "payload": {}, "extra": 1}, "derived_event.extra"),
    ],
)
def test_derived_event_of_the_wrong_shape_names_the_field(event: Any, field: str) -> None:
    message = invalid({"derived_event": event})
    assert message.startswith(f"{field}:"), message


@pytest.mark.parametrize("top", [[], [1], "text", 3, None, True])
def test_top_level_must_be_an_object(top: Any) -> None:
    assert "must be a JSON object" in invalid(top)


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (b'{"a":"\xff"}', "not valid UTF-8"),
        (b'{"a":"\xc3"}', "not valid UTF-8"),
        (b'{"a":"\xed\xa0\x80"}', "not valid UTF-8"),  # a surrogate encoded in UTF-8
        (b'{"a":}', "not valid JSON"),
        (b"", "not valid JSON"),
        (b'{"a":1} trailing', "not valid JSON"),
        (b"{'a':1}", "not valid JSON"),
        (b'{"n":1e999}', "invalid number"),
        (b'{"n":-1e999}', "invalid number"),
        (b'{"n":NaN}', "invalid number"),
        (b'{"n":Infinity}', "invalid number"),
        (b'{"n":' + b"9" * 5000 + b"}", "invalid number"),
        (b'{"n":' + b"9" * 65 + b"}", "invalid number"),
        (b'{"a":"nul \\u0000 inside"}', "NUL"),
        (b'{"key \\u0000":1}', "NUL"),
        (b'{"a":"lone \\ud800"}', "surrogate"),
        (b'{"a":["\\uDC00"]}', "surrogate"),
    ],
)
def test_hostile_documents(raw: bytes, needle: str) -> None:
    assert needle in invalid(raw)


def test_valid_escapes_and_big_but_sane_numbers_pass() -> None:
    out = parse_output(b'{"emoji":"\\ud83d\\ude00","n":' + b"9" * 64 + b',"f":1e308}')
    assert isinstance(out, ActionOutput)
    assert out.data["emoji"] == "\U0001f600"
    assert out.data["n"] == int("9" * 64)


def nested(depth: int) -> bytes:
    # The object itself is level 1, so depth - 1 arrays inside it.
    return b'{"a":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


def test_nesting_up_to_the_limit_passes() -> None:
    assert isinstance(parse_output(nested(MAX_DEPTH)), ActionOutput)


def test_nesting_past_the_limit_fails() -> None:
    assert "nested deeper" in invalid(nested(MAX_DEPTH + 1))


def test_pathological_nesting_fails_without_recursion_error() -> None:
    assert "nested deeper" in invalid(nested(100_000))


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    out = parse_output(json.dumps({"a": "[" * 10_000}).encode())
    assert isinstance(out, ActionOutput)
