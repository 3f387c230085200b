"""AIP-158 pagination: page sizes and opaque keyset page tokens."""

from __future__ import annotations

import base64
import json
from typing import Any

from libs.errors import invalid_field

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200


def page_size(requested: int, field: str = "page_size") -> int:
    if requested < 0:
        raise invalid_field(field, "must not be negative")
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)


def encode_token(cursor: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(cursor, default=str).encode()).decode()


def decode_token(
    token: str, keys: tuple[str, ...], field: str = "page_token"
) -> dict[str, Any] | None:
    """The cursor inside a token, or None for the first page."""
    if not token:
        return None
    try:
        cursor = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, RecursionError):
        cursor = None
    if not isinstance(cursor, dict) or set(cursor) != set(keys):
        raise invalid_field(field, "is not a token this list returned")
    return cursor
