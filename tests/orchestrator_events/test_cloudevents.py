"""SPEC §3: CloudEvents 1.0 records on `eventflow.events`, in structured and binary mode."""

from __future__ import annotations

import base64
import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.orchestrator.events.cloudevents import (
    MAX_PAYLOAD_BYTES,
    MAX_RECORD_BYTES,
    IncomingEvent,
    Invalid,
    OutgoingEvent,
    encode_binary,
    encode_structured,
    parse_record,
    partition_key,
)

Headers = list[tuple[str, bytes]]
STRUCTURED = [("content-type", b"application/cloudevents+json")]
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
REQUIRED = ("specversion", "id", "source", "type", "orgid", "projectid")

ATTRIBUTES = {
    "specversion": "1.0",
    "id": "evt-1",
    "source": "/checkout/web",
    "type": "order.placed",
    "orgid": "acme",
    "projectid": "shop",
}


def binary(
    value: bytes | None = b'{"userId": "u1"}', drop: tuple[str, ...] = (), **attributes: str
) -> tuple[bytes | None, Headers]:
    merged = {**ATTRIBUTES, **attributes}
    headers = [(f"ce_{k}", v.encode()) for k, v in merged.items() if k not in drop]
    return value, headers


def structured(drop: tuple[str, ...] = (), **members: Any) -> tuple[bytes, Headers]:
    envelope = {k: v for k, v in {**ATTRIBUTES, **members}.items() if k not in drop}
    return json.dumps(envelope).encode(), STRUCTURED


def binary_with(name: str, text: str) -> tuple[bytes | None, Headers]:
    value, headers = binary(drop=(name,))
    return value, [*headers, (f"ce_{name}", text.encode())]


def structured_with(name: str, member: object) -> tuple[bytes, Headers]:
    envelope = {**ATTRIBUTES, name: member}
    return json.dumps(envelope).encode(), STRUCTURED


def structured_raw_data(data: bytes) -> tuple[bytes, Headers]:
    """A structured record whose `data` member is exactly these bytes."""
    value, headers = structured()
    return value[:-1] + b', "data": ' + data + b"}", headers


def parsed(record: tuple[bytes | None, Headers]) -> IncomingEvent:
    result = parse_record(*record)
    assert isinstance(result, IncomingEvent), result
    return result


def refused(record: tuple[bytes | None, Headers], reason: str, named: str) -> Invalid:
    result = parse_record(*record)
    assert isinstance(result, Invalid), result
    assert result.reason == reason
    assert named in result.detail
    return result


def outgoing(**fields: Any) -> OutgoingEvent:
    base: dict[str, Any] = {
        "event_id": "evt-1",
        "source": "/checkout/web",
        "type": "order.placed",
        "organization_id": "acme",
        "project_id": "shop",
        "data_json": b'{"userId":"u1"}',
        "time": datetime(2025, 3, 1, 12, 30, 15, 123456, tzinfo=UTC),
    }
    return OutgoingEvent(**{**base, **fields})


def outgoing_fields(event: IncomingEvent | OutgoingEvent) -> dict[str, Any]:
    return {f.name: getattr(event, f.name) for f in dataclasses.fields(OutgoingEvent)}


# --- the two modes ------------------------------------------------------------------------


def test_binary_mode_reads_attributes_from_ce_headers_and_the_data_from_the_value() -> None:
    event = parsed(
        binary(
            b'{"userId": "u1", "total": 12.5}',
            environment="sandbox",
            time="2025-03-01T12:30:15.5+01:00",
            subject="order/42",
            replayskipsideeffects="true",
            causationid="evt-0",
            correlationid="corr-9",
            depth="3",
            traceparent=TRACEPARENT,
        )
    )
    assert event == IncomingEvent(
        event_id="evt-1",
        source="/checkout/web",
        type="order.placed",
        organization_id="acme",
        project_id="shop",
        environment="sandbox",
        data={"userId": "u1", "total": 12.5},
        data_json=b'{"userId": "u1", "total": 12.5}',
        time=datetime(2025, 3, 1, 11, 30, 15, 500000, tzinfo=UTC),
        subject="order/42",
        replay_skip_side_effects=True,
        causation_id="evt-0",
        correlation_id="corr-9",
        depth=3,
        traceparent=TRACEPARENT,
    )


def test_structured_mode_reads_the_whole_event_from_the_json_value() -> None:
    event = parsed(
        structured(
            environment="sandbox",
            time="2025-03-01T12:30:15Z",
            subject="order/42",
            replayskipsideeffects=True,
            causationid="evt-0",
            correlationid="corr-9",
            depth=3,
            traceparent=TRACEPARENT,
            datacontenttype="application/json",
            data={"userId": "u1", "note": "café"},
        )
    )
    assert (event.event_id, event.type, event.organization_id, event.project_id) == (
        "evt-1",
        "order.placed",
        "acme",
        "shop",
    )
    assert event.environment == "sandbox"
    assert event.data == {"userId": "u1", "note": "café"}
    assert event.time == datetime(2025, 3, 1, 12, 30, 15, tzinfo=UTC)
    assert event.subject == "order/42"
    assert event.replay_skip_side_effects is True
    assert (event.causation_id, event.correlation_id, event.depth) == ("evt-0", "corr-9", 3)
    assert event.traceparent == TRACEPARENT


def test_structured_mode_is_recognised_without_a_content_type_when_no_ce_headers_are_sent() -> None:
    value, _ = structured(data={"a": 1})
    assert parsed((value, [])).data == {"a": 1}


def test_structured_content_type_may_carry_parameters() -> None:
    value, _ = structured(data={"a": 1})
    headers = [("Content-Type", b"application/cloudevents+json; charset=UTF-8")]
    assert parsed((value, headers)).data == {"a": 1}


def test_binary_header_names_are_matched_without_regard_to_case() -> None:
    value, headers = binary()
    assert parsed((value, [(k.upper(), v) for k, v in headers])).event_id == "evt-1"


def test_binary_header_values_are_utf8() -> None:
    assert parsed(binary(subject="überweisung/ß")).subject == "überweisung/ß"


def test_absent_optional_attributes_take_their_defaults() -> None:
    for record in (binary(), structured(data={"userId": "u1"})):
        event = parsed(record)
        assert event.environment == "production"
        assert event.time is None
        assert event.subject is None
        assert event.replay_skip_side_effects is False
        assert (event.causation_id, event.correlation_id) == (None, None)
        assert event.depth == 0
        assert event.traceparent is None


@pytest.mark.parametrize(
    "record",
    [binary(None), binary(b""), structured(), structured(data=None)],
    ids=["binary-null-value", "binary-empty-value", "structured-no-data", "structured-null"],
)
def test_absent_data_is_an_empty_object(record: tuple[bytes | None, Headers]) -> None:
    event = parsed(record)
    assert (event.data, event.data_json) == ({}, b"{}")


def test_structured_json_null_attributes_count_as_absent() -> None:
    event = parsed(structured(subject=None, environment=None, depth=None))
    assert (event.subject, event.environment, event.depth) == (None, "production", 0)


# --- data and data_json -------------------------------------------------------------------


def test_binary_data_json_is_the_record_value_byte_for_byte() -> None:
    value = b'{ "name" : "Jos\\u00e9",\n  "n": 1.50 }'
    event = parsed(binary(value))
    assert event.data_json == value
    assert event.data == {"name": "José", "n": 1.5}


def test_structured_data_json_is_the_compact_reserialization_of_data() -> None:
    event = parsed(structured_raw_data(b'{ "name" : "Jos\\u00e9", "n": [1, 2] }'))
    assert event.data_json == '{"name":"José","n":[1,2]}'.encode()


def test_structured_data_base64_keeps_the_decoded_bytes_verbatim() -> None:
    payload = b'{ "a": 1 }'
    event = parsed(structured(data_base64=base64.b64encode(payload).decode()))
    assert (event.data, event.data_json) == ({"a": 1}, payload)


@pytest.mark.parametrize(
    "data_base64",
    ["not base64!", base64.b64encode(b"[1, 2]").decode(), base64.b64encode(b"{nope").decode(), 7],
    ids=["not-base64", "array", "not-json", "not-a-string"],
)
def test_structured_data_base64_must_decode_to_a_json_object(data_base64: object) -> None:
    refused(structured(data_base64=data_base64), "BAD_DATA", "`data_base64`")


def test_structured_data_and_data_base64_together_are_refused() -> None:
    record = structured(data={"a": 1}, data_base64=base64.b64encode(b'{"a":1}').decode())
    refused(record, "BAD_DATA", "`data_base64`")


@pytest.mark.parametrize("data", [[1, 2], "text", 3, True], ids=["array", "string", "int", "bool"])
def test_structured_data_must_be_a_json_object(data: object) -> None:
    refused(structured(data=data), "BAD_DATA", "`data`")


def test_structured_datacontenttype_must_be_json() -> None:
    refused(structured(datacontenttype="text/plain", data={}), "BAD_DATA", "`datacontenttype`")
    refused(structured(datacontenttype=3, data={}), "BAD_DATA", "`datacontenttype`")
    assert parsed(structured(datacontenttype="application/vnd.acme+json", data={"a": 1})).data


def test_binary_content_type_must_be_json() -> None:
    value, headers = binary()
    refused((value, [*headers, ("content-type", b"text/plain")]), "BAD_DATA", "`content-type`")
    accepted = (value, [*headers, ("content-type", b"application/json; charset=utf-8")])
    assert parsed(accepted).data == {"userId": "u1"}


def test_an_unsupported_cloudevents_format_is_refused() -> None:
    value, _ = structured()
    batch = [("content-type", b"application/cloudevents-batch+json")]
    refused((value, batch), "BAD_ATTRIBUTE", "`content-type`")


# --- BAD_JSON and NOT_AN_OBJECT -----------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        b"\xff\xfe{}",
        b'{"a": "\xc3"}',
        b"{nope",
        b'{"a": 1} trailing',
        b'{"a": NaN}',
        b'{"a": Infinity}',
        b'{"a": 1e400}',
        b'{"a": ' + b"9" * 5000 + b"}",
        b'{"a": 1, "a": 2}',
        b"\xef\xbb\xbf{}",
    ],
    ids=[
        "utf16-bom",
        "truncated-utf8",
        "syntax",
        "trailing",
        "nan",
        "infinity",
        "overflowing-float",
        "huge-int",
        "duplicate-key",
        "utf8-bom",
    ],
)
def test_a_binary_value_that_is_not_strict_json_is_bad_json(value: bytes) -> None:
    refused(binary(value), "BAD_JSON", "record value")


@pytest.mark.parametrize(
    "data",
    [b'{"a": "\\ud800"}', b'{"a": ["\\udfff"]}', b'{"a": "\\u0000"}', b'{"\\u0000": 1}'],
    ids=["lone-high-surrogate", "lone-low-surrogate", "nul", "nul-in-key"],
)
def test_data_postgresql_cannot_store_is_refused_in_every_mode(data: bytes) -> None:
    # jsonb refuses U+0000 and UTF-8 has no lone surrogates: such an event would fail at
    # insert and hold up its whole batch.
    refused(binary(data), "BAD_DATA", "`data`")
    refused(structured_raw_data(data), "BAD_DATA", "`data`")
    refused(structured(data_base64=base64.b64encode(data).decode()), "BAD_DATA", "`data`")


def test_a_paired_surrogate_escape_is_an_ordinary_character() -> None:
    assert parsed(binary(b'{"a": "\\ud83d\\ude00"}')).data == {"a": "\U0001f600"}


def test_a_structured_value_that_is_not_json_is_bad_json() -> None:
    refused((b"{nope", STRUCTURED), "BAD_JSON", "record value")
    refused((None, STRUCTURED), "BAD_JSON", "record value")


def test_duplicate_attributes_in_a_structured_envelope_are_refused() -> None:
    # Readers that keep the first and readers that keep the last would see two tenants.
    value = b'{"specversion":"1.0","id":"e","source":"s","type":"t",'
    value += b'"orgid":"acme","orgid":"other","projectid":"p"}'
    refused((value, STRUCTURED), "BAD_JSON", "record value")


def test_a_literal_backslash_u0000_in_text_is_fine() -> None:
    assert parsed(binary(b'{"path": "C:\\\\u0000"}')).data == {"path": "C:\\u0000"}


@pytest.mark.parametrize("mode", ["binary", "structured"])
def test_deeply_nested_json_is_bad_json_not_a_crash(mode: str) -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    if mode == "binary":
        refused(binary(b'{"a": ' + deep + b"}"), "BAD_JSON", "nested too deeply")
    else:
        value, headers = structured()
        refused((value[:-1] + b', "x": ' + deep + b"}", headers), "BAD_JSON", "nested too deeply")


@pytest.mark.parametrize("value", [b"[1, 2]", b'"text"', b"3", b"null"])
def test_a_binary_value_that_is_not_an_object_is_refused(value: bytes) -> None:
    refused(binary(value), "NOT_AN_OBJECT", "record value")


def test_a_structured_value_that_is_not_an_object_is_refused() -> None:
    refused((b"[1, 2]", STRUCTURED), "NOT_AN_OBJECT", "record value")


def test_details_never_quote_the_payload() -> None:
    secret = "sk_live_do_not_log"
    for record in (
        binary(f'{{"token": "{secret}"'.encode()),
        binary(f'["{secret}"]'.encode()),
        (f'{{"token": "{secret}", "token": 1}}'.encode(), STRUCTURED),
        structured(data=[secret]),
        structured(type=f"Bad.{secret}"),
    ):
        result = parse_record(*record)
        assert isinstance(result, Invalid)
        assert secret not in result.detail


# --- required attributes, specversion, type, tenant, environment ---------------------------


@pytest.mark.parametrize("name", REQUIRED)
@pytest.mark.parametrize("mode", ["binary", "structured"])
def test_every_required_attribute_is_required(mode: str, name: str) -> None:
    record = binary(drop=(name,)) if mode == "binary" else structured(drop=(name,))
    if mode == "structured" and name == "specversion":
        record = (record[0], STRUCTURED)  # without the header, no specversion means binary
    result = refused(record, "MISSING_ATTRIBUTE", f"`{name}`")
    assert result.detail == f"missing required attribute `{name}`"


def test_a_json_object_without_specversion_or_ce_headers_misses_specversion() -> None:
    refused((b'{"id": "e"}', []), "MISSING_ATTRIBUTE", "`specversion`")


@pytest.mark.parametrize("specversion", ["0.3", "1", "1.0 ", "2.0"])
def test_only_specversion_1_0_is_accepted(specversion: str) -> None:
    refused(binary(specversion=specversion), "BAD_SPECVERSION", "`specversion`")
    refused(structured(specversion=specversion), "BAD_SPECVERSION", "`specversion`")


def test_a_numeric_specversion_is_refused() -> None:
    refused(structured(specversion=1.0), "BAD_SPECVERSION", "`specversion`")


@pytest.mark.parametrize("event_type", ["a", "order.placed", "a_b-c.9", "x" * 120])
def test_event_types_are_lowercase_letters_digits_and_separators(event_type: str) -> None:
    assert parsed(binary(type=event_type)).type == event_type


@pytest.mark.parametrize(
    "event_type",
    ["Order.placed", "order.placed\n", "", "x" * 121, "order placed", "order/placed", "ordér"],
    ids=["uppercase", "trailing-newline", "empty", "too-long", "space", "slash", "non-ascii"],
)
def test_other_event_types_are_refused(event_type: str) -> None:
    refused(binary(type=event_type), "BAD_TYPE", "`type`")
    refused(structured(type=event_type), "BAD_TYPE", "`type`")


def test_a_non_string_type_is_refused() -> None:
    refused(structured(type=["order.placed"]), "BAD_TYPE", "`type`")


@pytest.mark.parametrize("name", ["orgid", "projectid"])
@pytest.mark.parametrize(
    "slug",
    ["Acme", "1acme", "-acme", "acme_eu", "a" * 64, "acme\n", ""],
    ids=["uppercase", "digit-first", "dash-first", "underscore", "too-long", "newline", "empty"],
)
def test_tenant_ids_must_be_slugs(name: str, slug: str) -> None:
    refused(binary_with(name, slug), "BAD_TENANT", f"`{name}`")
    refused(structured_with(name, slug), "BAD_TENANT", f"`{name}`")


def test_a_63_character_tenant_slug_is_accepted() -> None:
    slug = "a" + "b-9" * 20 + "cd"
    assert len(slug) == 63
    assert parsed(binary(orgid=slug, projectid=slug)).project_id == slug


@pytest.mark.parametrize("environment", ["production", "sandbox"])
def test_production_and_sandbox_are_the_environments(environment: str) -> None:
    assert parsed(binary(environment=environment)).environment == environment


@pytest.mark.parametrize("environment", ["staging", "Production", "", "sandbox\n"])
def test_any_other_environment_is_refused(environment: str) -> None:
    refused(binary(environment=environment), "BAD_ENVIRONMENT", "`environment`")
    refused(structured(environment=environment), "BAD_ENVIRONMENT", "`environment`")


# --- other attributes ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("id", ""),
        ("id", "x" * 201),
        ("id", "evt\n1"),
        ("id", "evt\x7f"),
        ("source", ""),
        ("source", "s" * 501),
        ("source", "/a\tb"),
        ("causationid", ""),
        ("causationid", "x" * 201),
        ("correlationid", "c\r"),
        ("subject", "order\x00"),
        ("time", "yesterday"),
        ("time", "2025-03-01"),
        ("time", "2025-03-01T12:00:00"),
        ("time", "2025-02-30T12:00:00Z"),
        ("time", "2025-03-01T12:00:00+0100"),
        ("replayskipsideeffects", "yes"),
        ("replayskipsideeffects", "True"),
        ("depth", "-1"),
        ("depth", "1001"),
        ("depth", "007"),
        ("depth", "three"),
    ],
)
def test_malformed_attributes_are_refused_by_name(name: str, value: str) -> None:
    refused(binary_with(name, value), "BAD_ATTRIBUTE", f"`{name}`")
    refused(structured_with(name, value), "BAD_ATTRIBUTE", f"`{name}`")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("id", 7),
        ("source", {"a": 1}),
        ("subject", 3),
        ("depth", 1.5),
        ("depth", True),
        ("depth", 1001),
        ("replayskipsideeffects", 1),
        ("subject", "\ud800"),
    ],
)
def test_structured_attributes_of_the_wrong_json_type_are_refused(name: str, value: object) -> None:
    refused(structured_with(name, value), "BAD_ATTRIBUTE", f"`{name}`")


def test_limits_on_ids_and_source_are_inclusive() -> None:
    event = parsed(binary(id="i" * 200, source="s" * 500, causationid="c" * 200))
    assert (len(event.event_id), len(event.source), len(event.causation_id or "")) == (
        200,
        500,
        200,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-03-01T12:00:00Z", datetime(2025, 3, 1, 12, tzinfo=UTC)),
        ("2025-03-01t12:00:00z", datetime(2025, 3, 1, 12, tzinfo=UTC)),
        ("2025-03-01T12:00:00.123456789-05:00", datetime(2025, 3, 1, 17, 0, 0, 123456, UTC)),
    ],
)
def test_time_is_rfc_3339_with_an_offset(text: str, expected: datetime) -> None:
    assert parsed(binary(time=text)).time == expected


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("false", False)])
def test_replay_skip_side_effects_is_a_boolean_string_in_headers(
    value: str, expected: bool
) -> None:
    assert parsed(binary(replayskipsideeffects=value)).replay_skip_side_effects is expected


@pytest.mark.parametrize("value", [True, "true"])
def test_replay_skip_side_effects_is_a_json_bool_or_string_when_structured(value: object) -> None:
    assert parsed(structured(replayskipsideeffects=value)).replay_skip_side_effects is True


@pytest.mark.parametrize("value", [0, 8, 1000, "1000"])
def test_depth_is_an_integer_up_to_1000(value: int | str) -> None:
    assert parsed(structured(depth=value)).depth == int(value)


def test_malformed_header_bytes_are_refused_by_header_name() -> None:
    value, headers = binary()
    refused((value, [*headers, ("ce_subject", b"\xff")]), "BAD_ATTRIBUTE", "`ce_subject`")


def test_a_repeated_ce_header_is_refused() -> None:
    value, headers = binary()
    repeated = [*headers, ("ce_orgid", b"other")]
    refused((value, repeated), "BAD_ATTRIBUTE", "`ce_orgid`")


def test_a_header_name_enters_the_detail_escaped_and_cut_short() -> None:
    value, headers = binary()
    name = "ce_x\x00" + "y" * 500
    result = refused((value, [*headers, (name, b"\xff")]), "BAD_ATTRIBUTE", "`ce_x\\x00yyy")
    assert "\x00" not in result.detail
    assert len(result.detail) < 120


def test_unknown_extensions_and_headers_are_ignored() -> None:
    value, headers = binary()
    extra = [*headers, ("ce_region", b"eu"), ("x-retry", b"\xff"), ("x-retry", b"2")]
    assert parsed((value, extra)).event_id == "evt-1"
    assert parsed(structured(region=["eu"])).event_id == "evt-1"


def test_the_traceparent_extension_comes_before_the_transport_header() -> None:
    other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    value, headers = binary(traceparent=TRACEPARENT)
    assert parsed((value, [*headers, ("traceparent", other.encode())])).traceparent == TRACEPARENT
    value, headers = binary()
    assert parsed((value, [*headers, ("traceparent", other.encode())])).traceparent == other


def test_a_repeated_or_undecodable_traceparent_header_is_ignored_not_refused() -> None:
    value, headers = binary()
    twice = [*headers, ("traceparent", TRACEPARENT.encode()), ("traceparent", b"x")]
    assert parsed((value, twice)).traceparent is None
    assert parsed((value, [*headers, ("traceparent", b"\xff")])).traceparent is None


@pytest.mark.parametrize(
    "traceparent",
    [
        "junk",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
    ],
)
def test_a_malformed_traceparent_is_ignored_not_refused(traceparent: str) -> None:
    assert parsed(binary(traceparent=traceparent)).traceparent is None
    assert parsed(structured(traceparent=traceparent)).traceparent is None


# --- size -----------------------------------------------------------------------------------


def object_of_size(size: int) -> bytes:
    value = b'{"pad":"' + b"x" * (size - 10) + b'"}'
    assert len(value) == size
    return value


def test_binary_data_of_exactly_1_mib_is_accepted_and_one_byte_more_is_refused() -> None:
    assert len(parsed(binary(object_of_size(MAX_PAYLOAD_BYTES))).data_json) == MAX_PAYLOAD_BYTES
    refused(binary(object_of_size(MAX_PAYLOAD_BYTES + 1)), "PAYLOAD_TOO_LARGE", "record value")


def test_structured_data_of_exactly_1_mib_is_accepted_and_one_byte_more_is_refused() -> None:
    exactly = structured_raw_data(object_of_size(MAX_PAYLOAD_BYTES))
    assert len(parsed(exactly).data_json) == MAX_PAYLOAD_BYTES
    over = structured_raw_data(object_of_size(MAX_PAYLOAD_BYTES + 1))
    refused(over, "PAYLOAD_TOO_LARGE", "`data`")


def test_size_is_checked_before_parsing() -> None:
    refused(binary(b"{" * (MAX_PAYLOAD_BYTES + 1)), "PAYLOAD_TOO_LARGE", "record value")
    refused((b"[" * (MAX_RECORD_BYTES + 1), STRUCTURED), "PAYLOAD_TOO_LARGE", "record")


def test_headers_count_toward_the_whole_record() -> None:
    value, headers = binary(object_of_size(MAX_PAYLOAD_BYTES))
    padding = ("x-padding", b"p" * (MAX_RECORD_BYTES - MAX_PAYLOAD_BYTES))
    refused((value, [*headers, padding]), "PAYLOAD_TOO_LARGE", "record")


# --- never raises ---------------------------------------------------------------------------

header_names = st.sampled_from(
    [
        "content-type",
        "traceparent",
        *(f"ce_{name}" for name in (*ATTRIBUTES, "time", "depth", "replayskipsideeffects")),
    ]
) | st.text(max_size=12)
header_values = st.sampled_from(
    [b"application/cloudevents+json", b"application/json", b"1.0", b"acme", b"true", b"7"]
) | st.binary(max_size=40)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)
envelopes = st.dictionaries(
    st.sampled_from(
        [*ATTRIBUTES, "data", "data_base64", "datacontenttype", "depth", "time", "environment"]
    ),
    json_values | st.sampled_from(list(ATTRIBUTES.values())),
)


@settings(max_examples=300, deadline=None)
@given(
    value=st.none() | st.binary(max_size=200),
    headers=st.lists(st.tuples(header_names, header_values), max_size=8),
)
def test_parse_record_never_raises_on_arbitrary_bytes(
    value: bytes | None, headers: Headers
) -> None:
    assert isinstance(parse_record(value, headers), IncomingEvent | Invalid)


@settings(max_examples=300, deadline=None)
@given(envelope=envelopes, with_header=st.booleans())
def test_parse_record_never_raises_on_arbitrary_envelopes(
    envelope: dict[str, Any], with_header: bool
) -> None:
    value = json.dumps({**ATTRIBUTES, **envelope}).encode()
    result = parse_record(value, STRUCTURED if with_header else [])
    assert isinstance(result, IncomingEvent | Invalid)


@settings(max_examples=300, deadline=None)
@given(position=st.integers(min_value=0), byte=st.integers(min_value=0, max_value=255))
def test_parse_record_never_raises_on_a_corrupted_record(position: int, byte: int) -> None:
    _, value, headers = encode_structured(outgoing(subject="ünïcode", depth=2))
    corrupted = bytearray(value)
    corrupted[position % len(corrupted)] = byte
    assert isinstance(parse_record(bytes(corrupted), headers), IncomingEvent | Invalid)


# --- encoding and round trips ---------------------------------------------------------------

ENCODERS = {"binary": encode_binary, "structured": encode_structured}


@pytest.mark.parametrize("mode", ENCODERS)
def test_an_encoded_event_parses_back_to_the_same_event(mode: str) -> None:
    event = outgoing(
        data_json='{"name":"Zoë ✓ 日本","nested":{"list":[1,2.5,null,true]}}'.encode(),
        environment="sandbox",
        subject="Straße/42",
        replay_skip_side_effects=True,
        causation_id="evt-0",
        correlation_id="corr-😀",
        depth=7,
        traceparent=TRACEPARENT,
        time=datetime(2025, 3, 1, 12, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    )
    key, value, headers = ENCODERS[mode](event)
    back = parsed((value, headers))
    assert outgoing_fields(back) == outgoing_fields(event)
    assert back.data == {"name": "Zoë ✓ 日本", "nested": {"list": [1, 2.5, None, True]}}
    assert key == partition_key(event) == partition_key(back)


@pytest.mark.parametrize("mode", ENCODERS)
def test_defaults_survive_the_round_trip(mode: str) -> None:
    event = outgoing(data_json=b"{}")
    back = parsed(ENCODERS[mode](event)[1:])
    assert outgoing_fields(back) == outgoing_fields(event)


def test_binary_encoding_sends_data_json_verbatim() -> None:
    event = outgoing(data_json=b'{ "a" : 1.50 }')
    _, value, headers = encode_binary(event)
    assert value == b'{ "a" : 1.50 }'
    assert ("content-type", b"application/json") in headers
    assert ("ce_specversion", b"1.0") in headers


def test_structured_encoding_sends_one_compact_json_object() -> None:
    event = outgoing(data_json=b'{ "a" : 1.50 }')
    _, value, headers = encode_structured(event)
    assert headers == [("content-type", b"application/cloudevents+json; charset=utf-8")]
    envelope = json.loads(value)
    assert envelope["data"] == {"a": 1.5}
    assert envelope["depth"] == 0
    assert envelope["replayskipsideeffects"] is False
    assert parsed((value, headers)).data_json == b'{"a":1.5}'


@pytest.mark.parametrize("mode", ENCODERS)
@pytest.mark.parametrize(
    ("fields", "reason", "named"),
    [
        ({"type": "Order.Placed"}, "BAD_TYPE", "`type`"),
        ({"type": ""}, "BAD_TYPE", "`type`"),
        ({"organization_id": "Acme"}, "BAD_TENANT", "`orgid`"),
        ({"environment": "staging"}, "BAD_ENVIRONMENT", "`environment`"),
        ({"event_id": ""}, "BAD_ATTRIBUTE", "`id`"),
        ({"depth": 1001}, "BAD_ATTRIBUTE", "`depth`"),
        ({"time": datetime(2025, 3, 1)}, "BAD_ATTRIBUTE", "`time`"),
        ({"data_json": object_of_size(MAX_PAYLOAD_BYTES + 1)}, "PAYLOAD_TOO_LARGE", "limit"),
    ],
)
def test_an_invalid_event_encodes_to_a_record_the_consumer_refuses(
    mode: str, fields: dict[str, Any], reason: str, named: str
) -> None:
    # The gRPC Publish validates exactly this way: encode, then parse what it would send.
    _, value, headers = ENCODERS[mode](outgoing(**fields))
    refused((value, headers), reason, named)


@pytest.mark.parametrize(
    ("data_json", "binary_reason", "structured_detail"),
    [
        (b"[1]", "NOT_AN_OBJECT", "`data_base64` must be a JSON object"),
        (b"{", "BAD_JSON", "`data_base64` is not JSON"),
        (b'{"a": "\\u0000"}', "BAD_DATA", "`data` contains U+0000"),
        (b"\xff", "BAD_JSON", "`data_base64` is not UTF-8"),
    ],
)
def test_invalid_data_json_encodes_to_a_record_the_consumer_refuses(
    data_json: bytes, binary_reason: str, structured_detail: str
) -> None:
    event = outgoing(data_json=data_json)
    refused(encode_binary(event)[1:], binary_reason, "")
    refused(encode_structured(event)[1:], "BAD_DATA", structured_detail)


def test_structured_encoding_never_splices_data_json_into_the_envelope() -> None:
    event = outgoing(data_json=b'{}, "causationid": "forged"')
    _, value, headers = encode_structured(event)
    assert b"forged" not in value
    refused((value, headers), "BAD_DATA", "`data_base64`")


def test_a_lone_surrogate_in_an_attribute_encodes_to_a_refused_record() -> None:
    event = outgoing(subject="\ud800")
    refused(encode_binary(event)[1:], "BAD_ATTRIBUTE", "`ce_subject`")
    refused(encode_structured(event)[1:], "BAD_JSON", "record value is not UTF-8")


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.text(st.characters(codec=None), max_size=12), min_size=7, max_size=7),
    data_json=st.binary(max_size=60) | st.sampled_from([b"{}", b'{"a":"\\u0000"}', b"[]"]),
    time=st.datetimes(timezones=st.sampled_from([UTC, None])),
    depth=st.integers(min_value=-(2**70), max_value=2**70),
    optional=st.booleans(),
)
def test_encoders_never_raise_and_the_consumer_always_answers(
    texts: list[str], data_json: bytes, time: datetime, depth: int, optional: bool
) -> None:
    event_id, source, event_type, org, project, environment, extra = texts
    event = OutgoingEvent(
        event_id=event_id,
        source=source,
        type=event_type,
        organization_id=org,
        project_id=project,
        data_json=data_json,
        time=time,
        environment=environment,
        subject=extra if optional else None,
        causation_id=extra if optional else None,
        traceparent=extra if optional else None,
        depth=depth,
    )
    for encode in ENCODERS.values():
        _, value, headers = encode(event)
        assert isinstance(parse_record(value, headers), IncomingEvent | Invalid)


def test_a_malformed_traceparent_is_dropped_on_the_way_through() -> None:
    for encode in ENCODERS.values():
        assert parsed(encode(outgoing(traceparent="junk"))[1:]).traceparent is None


identifiers = st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=40)
slugs = st.from_regex(r"[a-z][a-z0-9-]{0,62}", fullmatch=True)
data_objects = st.dictionaries(
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8),
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.text(st.characters(codec="utf-8", exclude_characters="\x00")),
    max_size=5,
)


@settings(max_examples=150, deadline=None)
@given(
    mode=st.sampled_from(sorted(ENCODERS)),
    event_id=identifiers,
    source=identifiers,
    event_type=st.from_regex(r"[a-z0-9_.\-]{1,120}", fullmatch=True),
    organization_id=slugs,
    project_id=slugs,
    environment=st.sampled_from(["production", "sandbox"]),
    data=data_objects,
    time=st.datetimes(timezones=st.just(UTC)),
    subject=st.none() | identifiers,
    replay=st.booleans(),
    causation_id=st.none() | identifiers,
    correlation_id=st.none() | identifiers,
    depth=st.integers(min_value=0, max_value=1000),
)
def test_any_valid_event_round_trips_in_both_modes(
    mode: str,
    event_id: str,
    source: str,
    event_type: str,
    organization_id: str,
    project_id: str,
    environment: str,
    data: dict[str, Any],
    time: datetime,
    subject: str | None,
    replay: bool,
    causation_id: str | None,
    correlation_id: str | None,
    depth: int,
) -> None:
    event = OutgoingEvent(
        event_id=event_id,
        source=source,
        type=event_type,
        organization_id=organization_id,
        project_id=project_id,
        data_json=json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode(),
        time=time,
        environment=environment,
        subject=subject,
        replay_skip_side_effects=replay,
        causation_id=causation_id,
        correlation_id=correlation_id,
        depth=depth,
    )
    key, value, headers = ENCODERS[mode](event)
    back = parsed((value, headers))
    assert outgoing_fields(back) == outgoing_fields(event)
    assert back.data == data
    assert key == partition_key(event)


# --- partition key --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({"subject": "order/42", "data_json": b'{"userId":"u1"}'}, b"acme/shop/order/42"),
        ({"data_json": b'{"email":"e@x","userId":"u1","audienceId":"a1"}'}, b"acme/shop/a1"),
        ({"data_json": b'{"email":"e@x","actorId":"act"}'}, b"acme/shop/act"),
        ({"data_json": b'{"targetUserId":"t","email":"e@x"}'}, b"acme/shop/t"),
        ({"data_json": b'{"email":"e@x"}'}, b"acme/shop/e@x"),
        ({"data_json": b'{"userId":42}'}, b"acme/shop/42"),
        ({"data_json": b'{"userId":"","email":"e@x"}'}, b"acme/shop/e@x"),
        ({"data_json": b'{"userId":true,"other":"x"}'}, b"acme/shop/evt-1"),
        ({"subject": "", "data_json": b"{}"}, b"acme/shop/evt-1"),
    ],
)
def test_the_partition_key_keeps_one_subjects_events_together(
    fields: dict[str, Any], key: bytes
) -> None:
    event = outgoing(**fields)
    assert partition_key(event) == key
    assert partition_key(parsed(encode_binary(event)[1:])) == key
