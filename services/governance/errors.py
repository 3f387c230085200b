"""Every ErrorInfo reason governance answers with, in one place."""

from __future__ import annotations

import grpc

from libs.errors import EventflowError, FieldViolation

DOMAIN = "eventflow.governance"

MODULE_INVALID = "MODULE_INVALID"
SIGNATURE_INVALID = "SIGNATURE_INVALID"
ACTION_IN_USE = "ACTION_IN_USE"
SELF_REVIEW = "SELF_REVIEW"
NO_VERSION = "NO_VERSION"


def _error(code: grpc.StatusCode, reason: str, message: str, field: str = "") -> EventflowError:
    violations = [FieldViolation(field, message)] if field else []
    return EventflowError(code, reason, message, domain=DOMAIN, violations=violations)


def module_invalid(reason: str) -> EventflowError:
    return _error(grpc.StatusCode.INVALID_ARGUMENT, MODULE_INVALID, reason, field="module")


def signature_invalid(reason: str) -> EventflowError:
    return _error(grpc.StatusCode.INVALID_ARGUMENT, SIGNATURE_INVALID, reason, field="signature")


def action_in_use(workflows: list[str]) -> EventflowError:
    shown = ", ".join(workflows[:10]) + (" ..." if len(workflows) > 10 else "")
    return _error(
        grpc.StatusCode.FAILED_PRECONDITION,
        ACTION_IN_USE,
        f"the action is used by {len(workflows)} workflow(s): {shown}; remove those steps first",
    )


def self_review() -> EventflowError:
    return _error(
        grpc.StatusCode.FAILED_PRECONDITION,
        SELF_REVIEW,
        "a version cannot be reviewed with the API key that uploaded it",
    )


def no_version(action: str) -> EventflowError:
    return _error(
        grpc.StatusCode.FAILED_PRECONDITION, NO_VERSION, f"action {action!r} has no versions"
    )
