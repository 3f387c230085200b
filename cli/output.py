"""Turning responses into text: aligned tables, key/value blocks and JSON.

A tiny renderer instead of a dependency: the CLI ships with the platform and
must install with nothing beyond what the services already need.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC
from typing import TextIO

from google.protobuf import json_format
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

EMPTY = "-"


def _cell(value: object, max_width: int | None) -> str:
    # One row per line: a newline inside a cell would break the alignment.
    text = str(value).replace("\r", " ").replace("\n", " ")
    if max_width is not None and len(text) > max_width:
        text = text[: max_width - 1] + "…"
    return text or EMPTY


def render_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], max_width: int | None = None
) -> str:
    """Columns padded to their widest cell; no trailing spaces."""
    cells = [[_cell(v, max_width) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], len(text))
    lines = []
    for row in [list(headers), *cells]:
        padded = [text.ljust(widths[i]) for i, text in enumerate(row)]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def render_fields(fields: Sequence[tuple[str, object]]) -> str:
    """``Label:  value`` lines with the values aligned."""
    width = max((len(label) for label, _ in fields), default=0) + 1
    return "\n".join(f"{label + ':':<{width}}  {_cell(value, None)}" for label, value in fields)


def to_dict(message: Message) -> dict[str, object]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def print_json(message: Message, out: TextIO) -> None:
    print(json.dumps(to_dict(message), indent=2, ensure_ascii=False), file=out)


def timestamp(ts: Timestamp) -> str:
    if ts.seconds == 0 and ts.nanos == 0:
        return EMPTY
    return ts.ToDatetime(tzinfo=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(ms: int) -> str:
    """Compact human form (``1h30m``, ``1500ms``) for step delays and backoffs."""
    if ms % 1000:
        return f"{ms}ms"
    seconds = ms // 1000
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


# `-o id` prints what the next command needs, first match wins: a new API
# key's secret (its only use is as a credential), else the resource's id.
ID_FIELDS = ("secret", "id", "event_id", "instance_id", "replay_id")


def primary_ids(message: Message) -> list[str]:
    """The identifiers ``-o id`` prints: the message's own, or each listed item's."""
    fields = message.DESCRIPTOR.fields_by_name
    for name in ID_FIELDS:
        if name in fields and isinstance(getattr(message, name), str) and getattr(message, name):
            return [getattr(message, name)]
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.is_repeated:
            if field.type == field.TYPE_STRING and field.name.endswith("_ids") and value:
                return list(value)
            if field.type == field.TYPE_MESSAGE and value:
                return [ids[0] for item in value if (ids := primary_ids(item))]
        elif (
            field.type == field.TYPE_MESSAGE
            and message.HasField(field.name)
            and (ids := primary_ids(value))
        ):
            return ids
    return []
