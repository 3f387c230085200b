"""Organizations, projects and plans: the rules, without storage."""

from __future__ import annotations

import re

from libs.auth import Principal
from libs.errors import invalid_field
from services.registry import errors

PLANS = ("starter", "team", "enterprise")
_SLUG = re.compile(r"[a-z][a-z0-9-]{0,62}")


def validate_slug(value: str, field: str) -> str:
    if not _SLUG.fullmatch(value or ""):
        raise invalid_field(
            field, "must start with a letter; lowercase letters, digits and '-', at most 63"
        )
    return value


def validate_plan(value: str, field: str = "plan") -> str:
    if value not in PLANS:
        raise invalid_field(field, f"must be one of {', '.join(PLANS)}; got {value!r}")
    return value


def check_environment_allowed(plan: str, environment: str) -> None:
    """Sandbox is a plan entitlement (SPEC §2)."""
    if environment == "sandbox" and plan == "starter":
        raise errors.sandbox_disabled(plan)


def organization_for(principal: Principal, requested: str, field: str = "organization_id") -> str:
    """The organization a call acts on; a tenant key cannot name another one."""
    if principal.is_operator:
        if not requested:
            raise invalid_field(field, "is required for the operator")
        return requested
    assert principal.organization_id is not None
    if requested and requested != principal.organization_id:
        # Same answer whether or not that organization exists.
        raise errors.organization_not_allowed(requested)
    return principal.organization_id


def project_for(principal: Principal, requested: str, *, required: bool = True) -> str | None:
    """The project a call acts on: the request's, or the key's own."""
    if principal.project_id:
        if requested and requested != principal.project_id:
            raise errors.project_not_allowed(requested)
        return principal.project_id
    if not requested and required:
        raise invalid_field("project_id", "is required (this API key is not bound to a project)")
    return requested or None
