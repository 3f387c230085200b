"""How a step's attempt ended, and whether trying again can help.

A guest has no clock, no randomness and no imports: the same module on the
same payload fails the same way every time, so guest failures and
governance refusals end the instance at once. Only infrastructure failures
(the executor unreachable, a call timing out, a webhook receiver erring)
are retried.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FINAL_GUEST_FAILURES = frozenset(
    {
        "FUEL_EXHAUSTED",
        "DEADLINE_EXCEEDED",
        "MEMORY_LIMIT",
        "STACK_OVERFLOW",
        "TRAP",
        "REJECTED",
        "OUTPUT_TOO_LARGE",
        "INVALID_OUTPUT",
        "ACTION_NOT_APPROVED",
        "ACTION_DISABLED",
    }
)


@dataclass(frozen=True)
class Outcome:
    """The result of one attempt of one step."""

    kind: str  # completed | skipped | retryable | final | waiting
    reason: str = ""
    error: str = ""
    output: dict[str, Any] = field(default_factory=dict)
    retry_after_s: float | None = None

    @classmethod
    def completed(cls, output: dict[str, Any] | None = None) -> Outcome:
        return cls("completed", output=output or {})

    @classmethod
    def skipped(cls, why: str) -> Outcome:
        return cls("skipped", error=why)

    @classmethod
    def retryable(cls, reason: str, error: str, retry_after_s: float | None = None) -> Outcome:
        return cls("retryable", reason=reason, error=error, retry_after_s=retry_after_s)

    @classmethod
    def final(cls, reason: str, error: str) -> Outcome:
        return cls("final", reason=reason, error=error)
