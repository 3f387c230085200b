"""The output contract of SPEC §6: one UTF-8 JSON object with two reserved keys.

Everything a guest returns is hostile input to the orchestrator, which
writes projections into PostgreSQL and emits derived events. So the whole
document is checked here, once, and failures name the offending field:
invalid UTF-8 or JSON, non-finite or absurdly long numbers, nesting deeper
than `MAX_DEPTH`, NUL characters or lone surrogates (PostgreSQL text cannot
hold them), and reserved keys of the wrong shape.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

from .result import ActionOutput, DerivedEvent, Failure, FailureReason, Projection

MAX_DEPTH: Final = 64
"""Deepest nesting of arrays/objects accepted (the top-level object is depth 1)."""
MAX_INT_DIGITS: Final = 64
"""No id or amount needs more; it also bounds Python's quadratic int parsing."""

_NAME = re.compile(r"[a-z0-9_.-]{1,120}")
_ENTITY_TYPE = re.compile(r"[a-z0-9_.-]{1,64}")
_EVENT_TYPE = _NAME  # event types: lowercase letters, digits, _ - ., 1-120 characters
_CHARSET = "a-z 0-9 _ . -"
# Escapes that decode to something PostgreSQL text cannot store (checked on the parsed value).
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")

_PROJECTION_FIELDS: Final = frozenset(
    {"name", "entity_type", "entity_id", "title", "status", "data"}
)
_EVENT_FIELDS: Final = frozenset({"type", "payload"})
_ABSENT: Final = object()


class _BadNumber(ValueError):
    pass


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _BadNumber(f"an integer has more than {MAX_INT_DIGITS} digits")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _BadNumber(f"number {text[:40]} is out of range")
    return value


def _parse_constant(text: str) -> float:
    raise _BadNumber(f"{text} is not valid JSON")


_DECODER = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant
)


def _invalid(message: str) -> Failure:
    return Failure(FailureReason.INVALID_OUTPUT, message)


def parse_output(raw: bytes) -> ActionOutput | Failure:
    """Decode and validate an output document (the bytes before the NUL)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return _invalid(f"output is not valid UTF-8 (byte {error.start})")
    try:
        document = _DECODER.decode(text)
    except RecursionError:
        return _invalid(f"output is nested deeper than {MAX_DEPTH} levels")
    except _BadNumber as error:
        return _invalid(f"output has an invalid number: {error}")
    except json.JSONDecodeError as error:
        return _invalid(
            f"output is not valid JSON: {error.msg} (line {error.lineno} column {error.colno})"
        )
    if not isinstance(document, dict):
        return _invalid(f"output must be a JSON object, not {_json_type(document)}")
    # Cheap filters first: only documents that could fail pay for a full walk.
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(document) > MAX_DEPTH:
        return _invalid(f"output is nested deeper than {MAX_DEPTH} levels")
    if "\\u" in text and _SUSPECT_ESCAPE.search(text):
        problem = _unstorable_text(document)
        if problem:
            return _invalid(problem)
    return _split(document)


def _split(document: dict[str, Any]) -> ActionOutput | Failure:
    projection: Projection | None = None
    event: DerivedEvent | None = None
    raw_projection = document.pop("projection", _ABSENT)
    if raw_projection is not _ABSENT:
        checked = _projection(raw_projection)
        if isinstance(checked, Failure):
            return checked
        projection = checked
    raw_event = document.pop("derived_event", _ABSENT)
    if raw_event is not _ABSENT and raw_event is not False:
        checked_event = _derived_event(raw_event)
        if isinstance(checked_event, Failure):
            return checked_event
        event = checked_event
    return ActionOutput(document, projection, event)


def _projection(value: Any) -> Projection | Failure:
    if not isinstance(value, dict):
        return _invalid(f"projection: must be an object, not {_json_type(value)}")
    unknown = value.keys() - _PROJECTION_FIELDS
    if unknown:
        return _invalid(f"projection.{min(unknown)}: unknown field")
    name = value.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return _invalid(f"projection.name: must be 1-120 characters of {_CHARSET}")
    entity_type = value.get("entity_type")
    if entity_type is not None and (
        not isinstance(entity_type, str) or not _ENTITY_TYPE.fullmatch(entity_type)
    ):
        return _invalid(f"projection.entity_type: must be 1-64 characters of {_CHARSET}")
    entity_id = _entity_id(value.get("entity_id"))
    if isinstance(entity_id, Failure):
        return entity_id
    if entity_type is not None and entity_id is None:
        return _invalid(
            "projection.entity_id: missing; an upsert needs both entity_type and entity_id"
            " (give neither to append)"
        )
    if entity_id is not None and entity_type is None:
        return _invalid(
            "projection.entity_type: missing; an upsert needs both entity_type and entity_id"
            " (give neither to append)"
        )
    title = value.get("title")
    if title is not None and (not isinstance(title, str) or len(title) > 200):
        return _invalid("projection.title: must be text of at most 200 characters")
    status = value.get("status")
    if status is not None and (not isinstance(status, str) or len(status) > 40):
        return _invalid("projection.status: must be text of at most 40 characters")
    return Projection(name, entity_type, entity_id, title, status, value.get("data"))


def _entity_id(value: Any) -> str | Failure | None:
    if value is None:
        return None
    if isinstance(value, str):
        text = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        text = json.dumps(value)  # canonical JSON spelling of the number
    else:
        return _invalid(f"projection.entity_id: must be text or a number, not {_json_type(value)}")
    if not 1 <= len(text) <= 200:
        return _invalid("projection.entity_id: must be 1-200 characters")
    return text


def _derived_event(value: Any) -> DerivedEvent | Failure:
    if not isinstance(value, dict):
        return _invalid(
            f"derived_event: must be an object {{type, payload}} or false, not {_json_type(value)}"
        )
    unknown = value.keys() - _EVENT_FIELDS
    if unknown:
        return _invalid(f"derived_event.{min(unknown)}: unknown field")
    event_type = value.get("type")
    if not isinstance(event_type, str) or not _EVENT_TYPE.fullmatch(event_type):
        return _invalid(f"derived_event.type: must be 1-120 characters of {_CHARSET}")
    payload = value.get("payload", _ABSENT)
    if not isinstance(payload, dict):
        found = "missing" if payload is _ABSENT else _json_type(payload)
        return _invalid(f"derived_event.payload: must be a JSON object, not {found}")
    return DerivedEvent(event_type, payload)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _depth(document: Any) -> int:
    """Nesting depth, iteratively (a recursive walk is what hostile input wants)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > MAX_DEPTH:
                return deepest
        children = value.values() if isinstance(value, dict) else value
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def _unstorable_text(document: Any) -> str | None:
    """Name the first NUL or lone surrogate in any key or string, if there is one."""
    stack: list[Any] = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            if "\x00" in value:
                return "output contains a NUL character (\\u0000), which cannot be stored"
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return "output contains a lone UTF-16 surrogate escape, which is not text"
    return None
