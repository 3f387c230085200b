"""Which organization and project a call acts on, from the caller's key."""

from __future__ import annotations

import grpc

from libs.auth.principal import Principal
from libs.errors import EventflowError, invalid_field


def organization_of(principal: Principal) -> str:
    if principal.organization_id is None:
        raise invalid_field("organization", "this call needs an organization's API key")
    return principal.organization_id


def project_scope(principal: Principal, requested: str, *, required: bool = True) -> str | None:
    """The request's project or the key's own; a project-bound key cannot name another."""
    if principal.project_id:
        if requested and requested != principal.project_id:
            raise EventflowError(
                grpc.StatusCode.PERMISSION_DENIED,
                "PROJECT_NOT_ALLOWED",
                f"this API key is not valid for project {requested!r}",
            )
        return principal.project_id
    if not requested and required:
        raise invalid_field("project_id", "is required (this API key is not bound to a project)")
    return requested or None
