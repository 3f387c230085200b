"""Re-entry: may this subject start this workflow again? (SPEC §7)

The subject is the first of these payload fields that is present; without
one, re-entry is not enforced. ``once`` blocks while the subject has any
instance of the workflow that did not fail; ``cooldown`` blocks within
``cooldown_minutes`` of the subject's last start. The caller makes the check
and the insert atomic (see storage.instances).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

SUBJECT_FIELDS = ("audienceId", "userId", "actorId", "targetUserId", "email")


def subject_of(payload: dict[str, Any]) -> str | None:
    for field in SUBJECT_FIELDS:
        value = payload.get(field)
        if value is not None and value != "" and not isinstance(value, (dict, list)):
            return str(value)
    return None


@dataclass(frozen=True)
class History:
    """What is known of the subject's earlier instances of the workflow."""

    has_unfailed_instance: bool
    last_start: datetime | None


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


def decide(reentry: dict[str, Any], history: History, now: datetime) -> Decision:
    mode = reentry.get("mode", "always")
    if mode == "once" and history.has_unfailed_instance:
        return Decision(False, "once: the subject already has an instance of this workflow")
    if mode == "cooldown" and history.last_start is not None:
        window = timedelta(minutes=int(reentry.get("cooldown_minutes", 60)))
        if now - history.last_start < window:
            return Decision(False, f"cooldown: the subject started less than {window} ago")
    return Decision(True)
