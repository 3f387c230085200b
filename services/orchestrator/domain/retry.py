"""When a failed attempt runs again: fixed or exponential backoff with jitter."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

MAX_BACKOFF = timedelta(hours=1)
# Up to +/-20%: retries of many instances that failed together spread out.
JITTER = 0.2


def retry_delay(retry: dict[str, Any], attempt: int, rng: random.Random | None = None) -> timedelta:
    """Delay before attempt ``attempt + 1`` after attempt ``attempt`` (1-based) failed."""
    base_ms = int(retry.get("backoff_delay_ms", 5000))
    if retry.get("backoff", "exponential") == "exponential":
        base_ms = base_ms * 2 ** max(0, attempt - 1)
    jitter = 1 + (rng or random).uniform(-JITTER, JITTER)
    return min(timedelta(milliseconds=base_ms * jitter), MAX_BACKOFF)


def may_retry(retry: dict[str, Any], attempt: int) -> bool:
    return attempt < int(retry.get("max_attempts", 3))
