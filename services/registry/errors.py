"""Every ErrorInfo reason the registry answers with, in one place."""

from __future__ import annotations

import grpc

from libs.errors import EventflowError

DOMAIN = "eventflow.registry"

SANDBOX_DISABLED = "SANDBOX_DISABLED"
WORKFLOW_ARCHIVED = "WORKFLOW_ARCHIVED"
WORKFLOW_NOT_PUBLISHED = "WORKFLOW_NOT_PUBLISHED"
WORKFLOW_PUBLISHED = "WORKFLOW_PUBLISHED"
ENVIRONMENT_LOCKED = "ENVIRONMENT_LOCKED"
PROJECT_NOT_ALLOWED = "PROJECT_NOT_ALLOWED"
ORGANIZATION_NOT_ALLOWED = "ORGANIZATION_NOT_ALLOWED"
OPERATOR_ONLY = "OPERATOR_ONLY"


def _precondition(reason: str, message: str) -> EventflowError:
    return EventflowError(grpc.StatusCode.FAILED_PRECONDITION, reason, message, domain=DOMAIN)


def sandbox_disabled(plan: str) -> EventflowError:
    return _precondition(
        SANDBOX_DISABLED,
        f"the {plan} plan has no sandbox environment; upgrade to team or enterprise",
    )


def archived(workflow_id: str) -> EventflowError:
    return _precondition(WORKFLOW_ARCHIVED, f"workflow {workflow_id} is archived")


def not_published(workflow_id: str) -> EventflowError:
    return _precondition(
        WORKFLOW_NOT_PUBLISHED, f"workflow {workflow_id} has never been published; publish it first"
    )


def already_published(workflow_id: str) -> EventflowError:
    return _precondition(
        WORKFLOW_PUBLISHED,
        f"workflow {workflow_id} has published versions and cannot be deleted; archive it instead",
    )


def environment_locked(workflow_id: str) -> EventflowError:
    return _precondition(
        ENVIRONMENT_LOCKED,
        f"workflow {workflow_id} is published; its environment can no longer change",
    )


def project_not_allowed(project_id: str) -> EventflowError:
    return EventflowError(
        grpc.StatusCode.PERMISSION_DENIED,
        PROJECT_NOT_ALLOWED,
        f"this API key is not valid for project {project_id!r}",
        domain=DOMAIN,
    )


def organization_not_allowed(organization_id: str) -> EventflowError:
    return EventflowError(
        grpc.StatusCode.PERMISSION_DENIED,
        ORGANIZATION_NOT_ALLOWED,
        f"this API key is not valid for organization {organization_id!r}",
        domain=DOMAIN,
    )


def operator_only() -> EventflowError:
    return EventflowError(
        grpc.StatusCode.PERMISSION_DENIED,
        OPERATOR_ONLY,
        "only the platform operator can do this",
        domain=DOMAIN,
    )
