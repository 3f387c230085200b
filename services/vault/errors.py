"""Every ErrorInfo reason the vault answers with, in one place.

No message built here takes a secret value. Keys and action names appear
only once validated (they are names, not secrets); validation messages
never repeat the rejected input, so a value pasted into the key field is not
echoed back into logs and terminals.
"""

from __future__ import annotations

import grpc

from libs.errors import EventflowError

DOMAIN = "eventflow.vault"

SECRET_NOT_FOUND = "SECRET_NOT_FOUND"
SECRET_INTEGRITY = "SECRET_INTEGRITY"
KEY_VERSION_UNAVAILABLE = "KEY_VERSION_UNAVAILABLE"
KEY_VERSION_NOT_FOUND = "KEY_VERSION_NOT_FOUND"
KEY_VERSION_IN_USE = "KEY_VERSION_IN_USE"
KEY_VERSION_PRIMARY = "KEY_VERSION_PRIMARY"
KEY_VERSION_RETIRED = "KEY_VERSION_RETIRED"
OPERATOR_ONLY = "OPERATOR_ONLY"
ORGANIZATION_NOT_ALLOWED = "ORGANIZATION_NOT_ALLOWED"
ORGANIZATION_KEY_REQUIRED = "ORGANIZATION_KEY_REQUIRED"


def _error(code: grpc.StatusCode, reason: str, message: str) -> EventflowError:
    return EventflowError(code, reason, message, domain=DOMAIN)


def secret_not_found(action: str, key: str) -> EventflowError:
    return _error(
        grpc.StatusCode.NOT_FOUND, SECRET_NOT_FOUND, f"no secret {key!r} for action {action!r}"
    )


def integrity(action: str, key: str, version: int) -> EventflowError:
    return _error(
        grpc.StatusCode.DATA_LOSS,
        SECRET_INTEGRITY,
        f"secret {key!r} of action {action!r} (version {version}) failed its integrity check;"
        " it was altered or moved, and is not served",
    )


def key_version_unavailable(action: str, key: str, kek_version: int) -> EventflowError:
    return _error(
        grpc.StatusCode.FAILED_PRECONDITION,
        KEY_VERSION_UNAVAILABLE,
        f"secret {key!r} of action {action!r} is wrapped by key version {kek_version},"
        " which this server's key ring does not hold",
    )


def key_version_not_found(version: int) -> EventflowError:
    return _error(
        grpc.StatusCode.NOT_FOUND,
        KEY_VERSION_NOT_FOUND,
        f"key version {version} is neither configured nor used",
    )


def key_version_in_use(version: int, usage: int) -> EventflowError:
    return _error(
        grpc.StatusCode.FAILED_PRECONDITION,
        KEY_VERSION_IN_USE,
        f"key version {version} still wraps {usage} secret version(s); run Rewrap first",
    )


def key_version_primary(version: int) -> EventflowError:
    return _error(
        grpc.StatusCode.FAILED_PRECONDITION,
        KEY_VERSION_PRIMARY,
        f"key version {version} is the primary and wraps new secrets;"
        " add a newer version to the key ring first",
    )


def key_version_retired(version: int) -> EventflowError:
    return _error(
        grpc.StatusCode.FAILED_PRECONDITION,
        KEY_VERSION_RETIRED,
        f"this server's primary key version {version} was retired;"
        " reload the vault with the current key ring",
    )


def operator_only() -> EventflowError:
    return _error(
        grpc.StatusCode.PERMISSION_DENIED,
        OPERATOR_ONLY,
        "only the platform operator can manage the key ring",
    )


def organization_not_allowed(organization_id: str) -> EventflowError:
    return _error(
        grpc.StatusCode.PERMISSION_DENIED,
        ORGANIZATION_NOT_ALLOWED,
        f"this API key is not valid for organization {organization_id!r}",
    )


def organization_key_required() -> EventflowError:
    return _error(
        grpc.StatusCode.PERMISSION_DENIED,
        ORGANIZATION_KEY_REQUIRED,
        "secrets belong to the organization, not to a project:"
        " changing them needs an organization-wide API key",
    )
