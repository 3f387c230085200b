"""The permissions a module declares: only `read_secret:<KEY>`, at most 25.

The declaration is what the reviewer consents to, so it is part of the
version: a module cannot widen its own access after approval.
"""

from __future__ import annotations

import json
import re

from libs.errors import FieldViolation, invalid_argument

MAX_PERMISSIONS = 25
_PERMISSION = re.compile(r"read_secret:[A-Za-z0-9_]{1,64}")


def parse_permissions(text: str) -> list[str]:
    """A JSON array or a comma/newline list -> unique entries, in order."""
    entries = _entries(text.strip())
    violations = [
        FieldViolation(
            f"permissions[{i}]", f"unsupported permission {entry!r}; only read_secret:<KEY>"
        )
        for i, entry in enumerate(entries)
        if not (isinstance(entry, str) and _PERMISSION.fullmatch(entry))
    ]
    if violations:
        raise invalid_argument(violations)
    unique = list(dict.fromkeys(entries))
    if len(unique) > MAX_PERMISSIONS:
        raise invalid_argument(
            [FieldViolation("permissions", f"at most {MAX_PERMISSIONS} entries, got {len(unique)}")]
        )
    return unique


def declared_secrets(permissions: list[str]) -> list[str]:
    return [p.split(":", 1)[1] for p in permissions]


def _entries(text: str) -> list[str]:
    if not text:
        return []
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as error:
            raise invalid_argument(
                [FieldViolation("permissions", f"is not a valid JSON array: {error.msg}")]
            ) from None
        if not isinstance(parsed, list):
            raise invalid_argument([FieldViolation("permissions", "must be a JSON array")])
        return [p.strip() if isinstance(p, str) else p for p in parsed]
    return [p.strip() for p in re.split(r"[,\n]", text) if p.strip()]
