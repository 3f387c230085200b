"""What a valid secret request is, and who may act on which organization. No I/O.

Validation messages describe the rule, never the rejected input: the value
field is write-only, and a value pasted into the key field must not come
back in an error.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from libs.auth import Principal
from libs.errors import FieldViolation, invalid_argument, invalid_field
from services.vault import errors
from services.vault.domain.values import SecretValue

MAX_VALUE_BYTES = 64 * 1024
MAX_ACTION_CHARS = 200
MAX_RESOLVE_KEYS = 25
MAX_PURPOSE_CHARS = 200
# fullmatch, never match with `$`: `$` also matches before a trailing newline.
_KEY = re.compile(r"[A-Za-z0-9_]{1,64}")


def key_violation(key: str, field: str = "key") -> FieldViolation | None:
    if _KEY.fullmatch(key):
        return None
    return FieldViolation(field, "must be 1-64 characters of A-Z, a-z, 0-9 and _")


def action_violation(action: str, field: str = "action") -> FieldViolation | None:
    if not action:
        return FieldViolation(field, "is required (the custom action's name)")
    if len(action) > MAX_ACTION_CHARS:
        return FieldViolation(field, f"must be at most {MAX_ACTION_CHARS} characters")
    if action != action.strip() or any(unicodedata.category(c)[0] == "C" for c in action):
        return FieldViolation(
            field, "must not start or end with whitespace or contain control characters"
        )
    return None


def value_violation(value: SecretValue, field: str = "value") -> FieldViolation | None:
    size = value.size
    if size == 0:
        return FieldViolation(field, "must not be empty")
    if size > MAX_VALUE_BYTES:
        return FieldViolation(
            field, f"must be at most {MAX_VALUE_BYTES} bytes in UTF-8 (got {size})"
        )
    return None


def check(*violations: FieldViolation | None) -> None:
    """Raise one INVALID_ARGUMENT naming every bad field, or return."""
    found = [v for v in violations if v is not None]
    if found:
        raise invalid_argument(found)


def validate_secret_name(action: str, key: str) -> None:
    check(action_violation(action), key_violation(key))


def validate_new_secret(action: str, key: str, value: SecretValue) -> None:
    check(action_violation(action), key_violation(key), value_violation(value))


def resolve_keys(action: str, keys: Sequence[str], purpose: str) -> list[str]:
    """The distinct keys of a Resolve request, in request order."""
    violations = [action_violation(action)]
    if len(keys) > MAX_RESOLVE_KEYS:
        violations.append(FieldViolation("keys", f"must list at most {MAX_RESOLVE_KEYS} keys"))
    else:
        violations.extend(key_violation(k, f"keys[{i}]") for i, k in enumerate(keys))
    if len(purpose) > MAX_PURPOSE_CHARS:
        violations.append(
            FieldViolation("purpose", f"must be at most {MAX_PURPOSE_CHARS} characters")
        )
    check(*violations)
    return list(dict.fromkeys(keys))


def organization_for(principal: Principal, requested: str) -> str:
    """The organization a tenant call acts on; a tenant key cannot name another one."""
    if principal.is_operator:
        if not requested:
            raise invalid_field("organization_id", "is required for the operator")
        return requested
    assert principal.organization_id is not None
    if requested and requested != principal.organization_id:
        # Same answer whether or not that organization exists.
        raise errors.organization_not_allowed(requested)
    return principal.organization_id


def organization_to_change(principal: Principal, requested: str) -> str:
    """As ``organization_for``, for writes: a project-bound key may only read."""
    organization = organization_for(principal, requested)
    if principal.project_id:
        raise errors.organization_key_required()
    return organization


def check_retirable(version: int, primary: int, usage: int) -> None:
    """A key version may be retired once it wraps nothing and wraps nothing new."""
    if version == primary:
        raise errors.key_version_primary(version)
    if usage:
        raise errors.key_version_in_use(version, usage)
