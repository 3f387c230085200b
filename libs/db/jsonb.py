"""How JSON parameters are written for PostgreSQL: orjson, several times faster than the
standard library on the hot path (event data, step outputs, batched rows), which takes
over for what orjson refuses (integers beyond 64 bits, keys that are not strings).

Reading stays with the standard library: orjson would turn an integer beyond 64 bits
into a float and lose digits.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from psycopg.types.json import Jsonb, set_json_dumps


def dumps(value: Any) -> str:
    """JSON text for ``value``; UUIDs and datetimes become strings PostgreSQL casts back."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def rows(records: list[dict[str, Any]]) -> Jsonb:
    """One parameter carrying a batch of rows, for ``jsonb_to_recordset``: a single value
    to adapt instead of one array per column, each adapted element by element."""
    return Jsonb(records)


def install() -> None:
    """Make every ``Jsonb`` parameter of this process use ``dumps``."""
    set_json_dumps(dumps)
