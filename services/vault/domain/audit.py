"""What the audit log records: one entry per thing done to a secret or a key."""

from __future__ import annotations

import enum
from dataclasses import dataclass

PLATFORM = ""  # the organization of platform-wide entries


class Operation(enum.StrEnum):
    SET_SECRET = "set_secret"
    DELETE_SECRET = "delete_secret"
    PURGE_SECRET_VERSIONS = "purge_secret_versions"
    RESOLVE = "resolve"
    REWRAP = "rewrap"
    RETIRE_KEY_VERSION = "retire_key_version"


class Outcome(enum.StrEnum):
    OK = "ok"
    NOT_FOUND = "not_found"
    DENIED = "denied"
    INTEGRITY_ERROR = "integrity_error"
    KEY_UNAVAILABLE = "key_unavailable"
    REFUSED = "refused"


@dataclass(frozen=True)
class AuditEntry:
    """Never holds a value: there is no field that could."""

    organization_id: str
    operation: Operation
    caller: str
    outcome: Outcome
    action: str = ""
    key: str = ""
    secret_version: int = 0
    detail: str = ""
