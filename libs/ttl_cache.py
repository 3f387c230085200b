"""A small time-bounded cache for lookups other services own (keys, secrets)."""

from __future__ import annotations

import time
from typing import Generic, TypeVar

V = TypeVar("V")
_MISSING = object()


class TtlCache(Generic[V]):
    def __init__(self, ttl_s: float, max_entries: int = 10_000) -> None:
        self._ttl = ttl_s
        self._max = max_entries
        self._entries: dict[str, tuple[float, V]] = {}

    def get(self, key: str) -> tuple[bool, V | None]:
        """(hit, value); a hit may hold None (a cached "not found")."""
        entry = self._entries.get(key)
        if entry is None or time.monotonic() - entry[0] >= self._ttl:
            return False, None
        return True, entry[1]

    def put(self, key: str, value: V) -> None:
        if len(self._entries) >= self._max:
            self._entries.clear()  # crude, but bounded; entries refill on demand
        self._entries[key] = (time.monotonic(), value)
