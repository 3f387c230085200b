"""Reading a workflow definition file into a ``Workflow`` message.

Everything a user can get wrong locally is caught here, before any call, with
the file name and the place of the mistake: a typo in a field name would
otherwise be dropped silently by a lenient parser and surface much later as a
workflow that behaves differently from the file.
"""

from __future__ import annotations

import difflib
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from eventflow.registry.v1 import workflow_pb2
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from cli.errors import UsageError

# The draft fields UpdateWorkflow accepts in its mask.
MASK_PATHS = ("name", "trigger_event", "environment", "steps", "reentry")
STDIN = "-"
_FAILED_FIELD = re.compile(r"Failed to parse (\w+) field: ")


def read_text(path: str, stdin: TextIO | None = None) -> tuple[str, str]:
    """The file's text and the name to use in messages (``-`` is stdin)."""
    if path == STDIN:
        return (stdin or sys.stdin).read(), "<stdin>"
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), path
    except FileNotFoundError:
        raise UsageError(f"workflow file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read workflow file {path}: {exc}") from None


def parse_workflow(text: str, name: str) -> tuple[workflow_pb2.Workflow, dict[str, Any]]:
    """The message and the raw object (whose keys decide the default mask)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{name}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{name}: expected a JSON object, got {type(data).__name__}")
    unknown = unknown_fields(data, workflow_pb2.Workflow.DESCRIPTOR, "")
    if unknown:
        count = f"{len(unknown)} unknown fields" if len(unknown) > 1 else "unknown field"
        lines = [f"  {path}: {hint}" for path, hint in unknown]
        raise UsageError("\n".join([f"{name}: {count}", *lines]))
    try:
        message = json_format.ParseDict(data, workflow_pb2.Workflow())
    except json_format.ParseError as exc:
        raise UsageError(f"{name}: {_parse_error(str(exc))}") from None
    return message, data


@dataclass(frozen=True)
class WorkflowFile:
    name: str
    workflow: workflow_pb2.Workflow
    # The mask paths the file sets: the default for ``workflows update``.
    present: list[str]


def load_workflow(path: str, stdin: TextIO | None = None) -> WorkflowFile:
    text, name = read_text(path, stdin)
    message, data = parse_workflow(text, name)
    return WorkflowFile(name, message, present_paths(data))


def _parse_error(text: str) -> str:
    """protobuf's message, with its ``Failed to parse x field:`` chain as a path.

    The "Available Fields" tail is dropped: it lists camelCase names that
    differ from the spelling workflow files use.
    """
    text = text.split("\n", 1)[0].rstrip(".")
    fields = []
    while match := _FAILED_FIELD.match(text):
        fields.append(match.group(1))
        text = text[match.end() :]
    return f"{'.'.join(fields)}: {text}" if fields else text


def unknown_fields(
    data: dict[str, Any], descriptor: Descriptor, prefix: str
) -> list[tuple[str, str]]:
    """Every key naming no field: its path and a hint (a close match if any)."""
    fields = descriptor.fields_by_name
    by_key = {f.name: f for f in descriptor.fields} | {f.json_name: f for f in descriptor.fields}
    problems = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        field = by_key.get(key)
        if field is None:
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"not a field of {descriptor.name}"
            problems.append((path, hint))
            continue
        if field.type != FieldDescriptor.TYPE_MESSAGE or field.message_type.GetOptions().map_entry:
            continue
        items = value if field.is_repeated else [value]
        if not isinstance(items, list):
            continue  # ParseDict reports the wrong shape.
        for index, item in enumerate(items):
            if isinstance(item, dict):
                where = f"{path}[{index}]." if field.is_repeated else f"{path}."
                problems.extend(unknown_fields(item, field.message_type, where))
    return problems


def present_paths(data: dict[str, Any]) -> list[str]:
    """The mask paths the file sets (either spelling), in canonical order."""
    fields = workflow_pb2.Workflow.DESCRIPTOR.fields_by_name
    return [p for p in MASK_PATHS if p in data or fields[p].json_name in data]


def parse_mask(raw: str) -> list[str]:
    paths = [p.strip() for p in raw.split(",") if p.strip()]
    bad = [p for p in paths if p not in MASK_PATHS]
    if bad:
        raise UsageError(f"unknown mask path {bad[0]!r}: choose from {', '.join(MASK_PATHS)}")
    if not paths:
        raise UsageError(f"--mask is empty: choose from {', '.join(MASK_PATHS)}")
    return paths


def update_mask(explicit: str | None, present: Sequence[str], name: str) -> list[str]:
    """The mask to send; never empty, because the server reads empty as "all"."""
    if explicit is not None:
        return parse_mask(explicit)
    if not present:
        raise UsageError(f"{name} sets none of {', '.join(MASK_PATHS)}: nothing to update")
    return list(present)
