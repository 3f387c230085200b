"""CloudEvents 1.0 over Kafka: the one mapping between bus records and events (SPEC §3).

Hand-written rather than the ``cloudevents`` SDK: the Kafka binding is a handful of header
rules, and ingest needs what the SDK does not give -- sizes checked before anything is
parsed, the payload's verbatim bytes, and a stable reason for every malformed record
instead of an exception, because the quarantine keeps that reason (SPEC §3).

Neither ``parse_record`` nor the encoders raise. A producer validates by parsing what it
encoded (as the gRPC Publish does), so both doors into ``eventflow.events`` apply the rules
in this one place.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

MAX_PAYLOAD_BYTES = 1024 * 1024
# What the attributes may add around the payload: the whole record (value and headers) is
# capped at MAX_PAYLOAD_BYTES + MAX_ENVELOPE_BYTES.
MAX_ENVELOPE_BYTES = 64 * 1024
MAX_RECORD_BYTES = MAX_PAYLOAD_BYTES + MAX_ENVELOPE_BYTES
# The most derived-event hops an event may claim. Stopping chains deeper than 8 (SPEC §3) is
# the orchestrator's rule; this only bounds what a record can say.
MAX_DEPTH = 1000
EVENT_TYPE = re.compile(r"[a-z0-9_.\-]{1,120}")  # fullmatch: `$` would accept a trailing "\n"
ENVIRONMENTS = ("production", "sandbox")
STRUCTURED_CONTENT_TYPE = "application/cloudevents+json"
DATA_CONTENT_TYPE = "application/json"

_SLUG = re.compile(r"[a-z][a-z0-9-]{0,62}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# PostgreSQL text and jsonb cannot hold U+0000, and UTF-8 cannot hold a lone surrogate: an
# event carrying either would fail at insert and stall its whole ingest batch.
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")
_UNSTORABLE_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})", re.ASCII
)
_DEPTH = re.compile(r"0|[1-9][0-9]{0,3}")
_TRACEPARENT = re.compile(
    r"(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}"
)
_PARTITION_DATA_KEYS = ("audienceId", "userId", "actorId", "targetUserId", "email")


class Reason(StrEnum):
    """Why a record is not an event; stored with it in the quarantine, so never renamed."""

    BAD_JSON = "BAD_JSON"
    NOT_AN_OBJECT = "NOT_AN_OBJECT"
    MISSING_ATTRIBUTE = "MISSING_ATTRIBUTE"
    BAD_SPECVERSION = "BAD_SPECVERSION"
    BAD_TYPE = "BAD_TYPE"
    BAD_TENANT = "BAD_TENANT"
    BAD_ENVIRONMENT = "BAD_ENVIRONMENT"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    BAD_DATA = "BAD_DATA"
    BAD_ATTRIBUTE = "BAD_ATTRIBUTE"


@dataclass(frozen=True)
class IncomingEvent:
    """An event as read from the bus.

    ``data_json`` is the payload's bytes as received: the record value in binary mode, the
    decoded ``data_base64`` in structured mode. A structured ``data`` member has no bytes of
    its own, so there ``data_json`` is its compact re-serialization,
    ``json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()``.
    """

    event_id: str
    source: str
    type: str
    organization_id: str
    project_id: str
    environment: str
    data: dict[str, Any]
    data_json: bytes
    time: datetime | None
    subject: str | None
    replay_skip_side_effects: bool
    causation_id: str | None
    correlation_id: str | None
    depth: int
    traceparent: str | None
    # Derived from a test run's instance: its instances are test runs too.
    test_run: bool = False


@dataclass(frozen=True)
class OutgoingEvent:
    """An event to publish; ``data_json`` (a JSON object) is the payload, sent verbatim in
    binary mode. ``time`` must carry a UTC offset."""

    event_id: str
    source: str
    type: str
    organization_id: str
    project_id: str
    data_json: bytes
    time: datetime
    environment: str = "production"
    subject: str | None = None
    replay_skip_side_effects: bool = False
    causation_id: str | None = None
    correlation_id: str | None = None
    depth: int = 0
    traceparent: str | None = None
    test_run: bool = False

    @property
    def data(self) -> dict[str, Any]:
        """The parsed payload; ValueError when ``data_json`` is not one the consumer accepts."""
        data = _json_object(self.data_json, "`data`", Reason.BAD_DATA)
        _check_storable(data, self.data_json)
        return data


@dataclass(frozen=True)
class Invalid:
    reason: str
    detail: str  # names the attribute or part at fault; never quotes the payload


class _Refused(ValueError):
    """Carries an Invalid out of nested checks; ``parse_record`` returns it instead."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.invalid = Invalid(reason, detail)


# --- reading ------------------------------------------------------------------------------


def parse_record(
    value: bytes | None, headers: Sequence[tuple[str, bytes]]
) -> IncomingEvent | Invalid:
    """The event a Kafka record carries, or why it carries none. Never raises.

    Structured mode when ``content-type`` is ``application/cloudevents+json``, or when there
    are no ``ce_`` headers and the value is a JSON object with ``specversion``; binary mode
    (``ce_`` headers, the value is the data) otherwise.
    """
    try:
        return _parse(value, headers)
    except _Refused as refused:
        return refused.invalid


def _parse(value: bytes | None, headers: Sequence[tuple[str, bytes]]) -> IncomingEvent:
    size = len(value or b"") + sum(_header_size(name, raw) for name, raw in headers)
    if size > MAX_RECORD_BYTES:
        raise _Refused(
            Reason.PAYLOAD_TOO_LARGE, f"record is {size} bytes, over the {MAX_RECORD_BYTES} limit"
        )
    named = _read_headers(headers)
    traceparent = _traceparent_header(headers)
    content_type = named.get("content-type")
    if content_type is not None and _media_type(content_type).startswith("application/cloudevents"):
        if _media_type(content_type) != STRUCTURED_CONTENT_TYPE:
            raise _Refused(
                Reason.BAD_ATTRIBUTE, "header `content-type` names an unsupported event format"
            )
        raw = value or b""
        return _structured(_json_object(raw, "record value", Reason.BAD_JSON), raw, traceparent)
    binary = {
        name.removeprefix("ce_"): text for name, text in named.items() if name.startswith("ce_")
    }
    if not binary and value:
        envelope = _json(value, "record value", Reason.BAD_JSON)
        if isinstance(envelope, dict) and "specversion" in envelope:
            return _structured(envelope, value, traceparent)
    return _binary(value, binary, content_type, traceparent)


def _binary(
    value: bytes | None,
    attributes: dict[str, str],
    content_type: str | None,
    traceparent: str | None,
) -> IncomingEvent:
    if value is not None and len(value) > MAX_PAYLOAD_BYTES:
        raise _Refused(Reason.PAYLOAD_TOO_LARGE, _too_large("record value", len(value)))
    fields = _attributes(attributes, traceparent)
    if content_type is not None and not _is_json(content_type):
        raise _Refused(Reason.BAD_DATA, "header `content-type` must be application/json")
    if not value:
        return IncomingEvent(data={}, data_json=b"{}", **fields)
    data = _json_object(value, "record value", Reason.BAD_JSON)
    _check_storable(data, value)
    return IncomingEvent(data=data, data_json=bytes(value), **fields)


def _structured(envelope: dict[str, Any], raw: bytes, traceparent: str | None) -> IncomingEvent:
    fields = _attributes(envelope, traceparent)
    content_type = envelope.get("datacontenttype")
    if content_type is not None and not (isinstance(content_type, str) and _is_json(content_type)):
        raise _Refused(Reason.BAD_DATA, "attribute `datacontenttype` must be application/json")
    data, encoded = envelope.get("data"), envelope.get("data_base64")
    if data is not None and encoded is not None:
        raise _Refused(Reason.BAD_DATA, "both `data` and `data_base64` are present")
    if encoded is not None:
        return IncomingEvent(**_base64_data(encoded), **fields)
    if data is None:
        return IncomingEvent(data={}, data_json=b"{}", **fields)
    if not isinstance(data, dict):
        raise _Refused(Reason.BAD_DATA, "`data` must be a JSON object")
    _check_storable(data, raw)
    try:
        data_json = _compact(data)
    except (ValueError, RecursionError):
        raise _Refused(Reason.BAD_DATA, "`data` cannot be re-serialized as JSON") from None
    if len(data_json) > MAX_PAYLOAD_BYTES:
        raise _Refused(Reason.PAYLOAD_TOO_LARGE, _too_large("`data`", len(data_json)))
    return IncomingEvent(data=data, data_json=data_json, **fields)


def _base64_data(encoded: object) -> dict[str, Any]:
    if not isinstance(encoded, str):
        raise _Refused(Reason.BAD_DATA, "`data_base64` must be a string")
    try:
        data_json = base64.b64decode(encoded, validate=True)
    except ValueError:  # binascii.Error, or a non-ASCII character
        raise _Refused(Reason.BAD_DATA, "`data_base64` is not valid base64") from None
    if len(data_json) > MAX_PAYLOAD_BYTES:
        raise _Refused(Reason.PAYLOAD_TOO_LARGE, _too_large("`data_base64`", len(data_json)))
    data = _json_object(data_json, "`data_base64`", Reason.BAD_DATA)
    _check_storable(data, data_json)
    return {"data": data, "data_json": data_json}


def _attributes(attributes: Mapping[str, object], traceparent_header: str | None) -> dict[str, Any]:
    """The IncomingEvent fields that come from attributes (all but the data)."""
    if _required(attributes, "specversion", Reason.BAD_SPECVERSION) != "1.0":
        raise _Refused(Reason.BAD_SPECVERSION, 'attribute `specversion` must be "1.0"')
    event_id = _identifier(_required(attributes, "id", Reason.BAD_ATTRIBUTE), "id", 200)
    source = _identifier(_required(attributes, "source", Reason.BAD_ATTRIBUTE), "source", 500)
    event_type = _required(attributes, "type", Reason.BAD_TYPE)
    if not EVENT_TYPE.fullmatch(event_type):
        raise _Refused(
            Reason.BAD_TYPE, "attribute `type` must be 1-120 of lowercase a-z, 0-9, `_`, `.`, `-`"
        )
    organization_id = _slug(attributes, "orgid")
    project_id = _slug(attributes, "projectid")
    environment = _text(attributes, "environment", Reason.BAD_ENVIRONMENT)
    if environment is not None and environment not in ENVIRONMENTS:
        raise _Refused(
            Reason.BAD_ENVIRONMENT, "attribute `environment` must be production or sandbox"
        )
    return {
        "event_id": event_id,
        "source": source,
        "type": event_type,
        "organization_id": organization_id,
        "project_id": project_id,
        "environment": environment or "production",
        "time": _time(attributes),
        "subject": _text(attributes, "subject", Reason.BAD_ATTRIBUTE),
        "replay_skip_side_effects": _boolean(attributes, "replayskipsideeffects"),
        "causation_id": _optional_identifier(attributes, "causationid"),
        "correlation_id": _optional_identifier(attributes, "correlationid"),
        "depth": _depth(attributes),
        "traceparent": _traceparent(attributes.get("traceparent"), traceparent_header),
        "test_run": _boolean(attributes, "testrun"),
    }


def _text(attributes: Mapping[str, object], name: str, reason: Reason) -> str | None:
    """A string attribute, None when absent (JSON null counts as absent)."""
    value = attributes.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Refused(reason, f"attribute `{name}` must be a string")
    if _UNSTORABLE.search(value):
        raise _Refused(reason, f"attribute `{name}` contains U+0000 or a lone surrogate")
    return value


def _required(attributes: Mapping[str, object], name: str, reason: Reason) -> str:
    value = _text(attributes, name, reason)
    if value is None:
        raise _Refused(Reason.MISSING_ATTRIBUTE, f"missing required attribute `{name}`")
    return value


def _identifier(value: str, name: str, limit: int) -> str:
    if not 0 < len(value) <= limit or _CONTROL.search(value):
        raise _Refused(
            Reason.BAD_ATTRIBUTE,
            f"attribute `{name}` must be 1-{limit} characters without control characters",
        )
    return value


def _optional_identifier(attributes: Mapping[str, object], name: str) -> str | None:
    value = _text(attributes, name, Reason.BAD_ATTRIBUTE)
    return None if value is None else _identifier(value, name, 200)


def _slug(attributes: Mapping[str, object], name: str) -> str:
    value = _required(attributes, name, Reason.BAD_TENANT)
    if not _SLUG.fullmatch(value):
        raise _Refused(
            Reason.BAD_TENANT,
            f"attribute `{name}` must start with a letter; lowercase letters, digits and '-',"
            " at most 63",
        )
    return value


def _time(attributes: Mapping[str, object]) -> datetime | None:
    value = _text(attributes, "time", Reason.BAD_ATTRIBUTE)
    if value is None:
        return None
    if _RFC3339.fullmatch(value):
        try:
            return datetime.fromisoformat(value.upper())
        except ValueError:  # in the pattern but not on the calendar: 2024-02-30, 25:00
            pass
    raise _Refused(Reason.BAD_ATTRIBUTE, "attribute `time` must be an RFC 3339 timestamp")


def _boolean(attributes: Mapping[str, object], name: str) -> bool:
    value = attributes.get(name)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise _Refused(Reason.BAD_ATTRIBUTE, f"attribute `{name}` must be true or false")


def _depth(attributes: Mapping[str, object]) -> int:
    value = attributes.get("depth")
    if value is None:
        return 0
    if isinstance(value, str) and _DEPTH.fullmatch(value):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_DEPTH:
        return value
    raise _Refused(Reason.BAD_ATTRIBUTE, f"attribute `depth` must be an integer 0-{MAX_DEPTH}")


def _traceparent(extension: object, header: str | None) -> str | None:
    """The event's own trace context (the extension) before the hop's (the header).

    A malformed one is ignored, as W3C Trace Context asks of receivers: a broken trace must
    not cost the event.
    """
    for candidate in (extension, header):
        if isinstance(candidate, str) and _TRACEPARENT.fullmatch(candidate):
            return candidate
    return None


def _read_headers(headers: Sequence[tuple[str, bytes]]) -> dict[str, str]:
    """``content-type`` and the ``ce_`` headers by lower-case name, decoded as UTF-8.

    A repeated one is refused: two ``ce_orgid`` headers would let two readers disagree on
    the tenant.
    """
    named: dict[str, str] = {}
    for name, raw in headers:
        key = name.lower()
        if not (key.startswith("ce_") or key == "content-type") or raw is None:
            continue
        # The name comes from the record: escaped and cut short before it enters a detail.
        shown = ascii(key)[1:-1][:64]
        if key in named:
            raise _Refused(Reason.BAD_ATTRIBUTE, f"header `{shown}` appears more than once")
        try:
            named[key] = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _Refused(Reason.BAD_ATTRIBUTE, f"header `{shown}` is not UTF-8") from None
    return named


def _traceparent_header(headers: Sequence[tuple[str, bytes]]) -> str | None:
    """The transport's trace context: read leniently, since it is no part of the event."""
    found = [raw for name, raw in headers if name.lower() == "traceparent" and raw is not None]
    return found[0].decode("utf-8", "replace") if len(found) == 1 else None


def _header_size(name: str, raw: bytes | None) -> int:
    return len(name.encode("utf-8", "surrogatepass")) + len(raw or b"")


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _is_json(content_type: str) -> bool:
    media_type = _media_type(content_type)
    return media_type == DATA_CONTENT_TYPE or ("/" in media_type and media_type.endswith("+json"))


def _too_large(what: str, size: int) -> str:
    return f"{what} is {size} bytes, over the {MAX_PAYLOAD_BYTES} limit"


# --- JSON ---------------------------------------------------------------------------------


class _NotJson(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Parsers differ on which duplicate wins; refusing them keeps every reader in agreement.
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _NotJson("an object repeats a key")
    return obj


def _finite(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise _NotJson("a number is out of range")
    return number


def _no_constants(literal: str) -> Any:
    raise _NotJson(f"{literal} is not JSON")


def _json(raw: bytes, what: str, reason: Reason) -> Any:
    """Strict JSON from UTF-8 bytes; every failure becomes ``reason``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Refused(reason, f"{what} is not UTF-8 (byte {exc.start})") from None
    try:
        parsed = json.loads(
            text, object_pairs_hook=_unique_keys, parse_float=_finite, parse_constant=_no_constants
        )
    except json.JSONDecodeError as exc:
        raise _Refused(reason, f"{what} is not JSON: {exc.msg} at character {exc.pos}") from None
    except _NotJson as exc:
        raise _Refused(reason, f"{what} is not JSON: {exc}") from None
    except ValueError:  # an integer beyond Python's digit limit
        raise _Refused(reason, f"{what} is not JSON: a number is out of range") from None
    except RecursionError:
        raise _Refused(reason, f"{what} is nested too deeply") from None
    return parsed


def _json_object(raw: bytes, what: str, reason: Reason) -> dict[str, Any]:
    parsed = _json(raw, what, reason)
    if not isinstance(parsed, dict):
        not_object = Reason.NOT_AN_OBJECT if reason is Reason.BAD_JSON else reason
        raise _Refused(not_object, f"{what} must be a JSON object")
    return parsed


def _check_storable(data: dict[str, Any], raw: bytes) -> None:
    """Refuse data holding U+0000 or a lone surrogate; only a JSON escape can put one there."""
    if _UNSTORABLE_ESCAPE.search(raw) and _holds_unstorable(data):
        raise _Refused(Reason.BAD_DATA, "`data` contains U+0000 or a lone surrogate")


def _holds_unstorable(parsed: Any) -> bool:
    # A loop, not recursion: the parser may have accepted nesting near the recursion limit.
    pending = [parsed]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if _UNSTORABLE.search(item):
                return True
        elif isinstance(item, dict):
            pending.extend(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


# --- writing ------------------------------------------------------------------------------

EncodedRecord = tuple[bytes | None, bytes, list[tuple[str, bytes]]]


def encode_binary(event: OutgoingEvent) -> EncodedRecord:
    """(key, value, headers) in binary mode: ``ce_`` headers, ``data_json`` verbatim as the value.

    An invalid event still encodes, to a record ``parse_record`` refuses with the reason.
    """
    headers = [
        # surrogatepass: a lone surrogate becomes bytes the parser refuses by header name.
        (f"ce_{name}", text.encode("utf-8", "surrogatepass"))
        for name, text in _attribute_strings(event)
    ]
    headers.append(("content-type", DATA_CONTENT_TYPE.encode()))
    return partition_key(event), event.data_json, headers


def encode_structured(event: OutgoingEvent) -> EncodedRecord:
    """(key, value, headers) in structured mode: the whole event as one compact JSON object.

    An invalid event still encodes, to a record ``parse_record`` refuses with the reason.
    """
    envelope: dict[str, Any] = dict(_attribute_strings(event))
    envelope["replayskipsideeffects"] = event.replay_skip_side_effects
    envelope["depth"] = event.depth
    if event.test_run:
        envelope["testrun"] = True
    envelope["datacontenttype"] = DATA_CONTENT_TYPE
    try:
        envelope["data"] = event.data
    except ValueError:
        # Never spliced in as text: a data_json of `{}, "causationid": "x"` would add an
        # attribute. Base64 keeps it inert, and the parser refuses it as BAD_DATA.
        envelope["data_base64"] = base64.b64encode(event.data_json).decode()
    value = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False)
    headers = [("content-type", f"{STRUCTURED_CONTENT_TYPE}; charset=utf-8".encode())]
    return partition_key(event), value.encode("utf-8", "surrogatepass"), headers


def partition_key(event: IncomingEvent | OutgoingEvent) -> bytes:
    """``<orgid>/<projectid>/<who>``: one subject's events stay in order on one partition.

    ``who`` is the subject, else the first of audienceId, userId, actorId, targetUserId,
    email in the data, else the event id.
    """
    who = _partition_subject(event)
    return f"{event.organization_id}/{event.project_id}/{who}".encode("utf-8", "surrogatepass")


def _partition_subject(event: IncomingEvent | OutgoingEvent) -> str:
    if event.subject:
        return event.subject
    try:
        data = event.data
    except ValueError:  # an invalid OutgoingEvent: its record will be refused anyway
        return event.event_id
    for name in _PARTITION_DATA_KEYS:
        value = data.get(name)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return event.event_id


def _attribute_strings(event: OutgoingEvent) -> list[tuple[str, str]]:
    attributes = [
        ("specversion", "1.0"),
        ("id", event.event_id),
        ("source", event.source),
        ("type", event.type),
        ("time", event.time.isoformat()),
        ("orgid", event.organization_id),
        ("projectid", event.project_id),
        ("environment", event.environment),
        ("subject", event.subject),
        ("replayskipsideeffects", "true" if event.replay_skip_side_effects else "false"),
        ("causationid", event.causation_id),
        ("correlationid", event.correlation_id),
        ("depth", str(event.depth)),
        ("traceparent", event.traceparent),
        ("testrun", "true" if event.test_run else None),
    ]
    return [(name, text) for name, text in attributes if text is not None]
