"""Storage rows and use-case results -> protobuf. Nothing here sees a value."""

from __future__ import annotations

from eventflow.vault.v1 import audit_service_pb2 as audit_pb
from eventflow.vault.v1 import key_ring_service_pb2 as key_ring_pb
from eventflow.vault.v1 import secret_service_pb2 as secret_pb

from libs.errors import invalid_field
from libs.timestamps import timestamp
from services.vault.domain.audit import Operation, Outcome
from services.vault.rotation import KeyVersionView
from services.vault.storage.audit import AuditRow
from services.vault.storage.secrets import SecretRow, VersionRow

_OPERATIONS = {
    Operation.SET_SECRET: audit_pb.AUDIT_OPERATION_SET_SECRET,
    Operation.DELETE_SECRET: audit_pb.AUDIT_OPERATION_DELETE_SECRET,
    Operation.PURGE_SECRET_VERSIONS: audit_pb.AUDIT_OPERATION_PURGE_SECRET_VERSIONS,
    Operation.RESOLVE: audit_pb.AUDIT_OPERATION_RESOLVE,
    Operation.REWRAP: audit_pb.AUDIT_OPERATION_REWRAP,
    Operation.RETIRE_KEY_VERSION: audit_pb.AUDIT_OPERATION_RETIRE_KEY_VERSION,
}
_OPERATION_NAMES = {number: operation for operation, number in _OPERATIONS.items()}
_OUTCOMES = {
    Outcome.OK: audit_pb.AUDIT_OUTCOME_OK,
    Outcome.NOT_FOUND: audit_pb.AUDIT_OUTCOME_NOT_FOUND,
    Outcome.DENIED: audit_pb.AUDIT_OUTCOME_DENIED,
    Outcome.INTEGRITY_ERROR: audit_pb.AUDIT_OUTCOME_INTEGRITY_ERROR,
    Outcome.KEY_UNAVAILABLE: audit_pb.AUDIT_OUTCOME_KEY_UNAVAILABLE,
    Outcome.REFUSED: audit_pb.AUDIT_OUTCOME_REFUSED,
}
_KEY_STATES = {
    "primary": key_ring_pb.KEY_VERSION_STATE_PRIMARY,
    "decrypt_only": key_ring_pb.KEY_VERSION_STATE_DECRYPT_ONLY,
    "retired": key_ring_pb.KEY_VERSION_STATE_RETIRED,
    "missing": key_ring_pb.KEY_VERSION_STATE_MISSING,
}


def secret_proto(row: SecretRow) -> secret_pb.Secret:
    return secret_pb.Secret(
        organization_id=row.organization_id,
        action=row.action,
        key=row.key,
        version=row.latest_version,
        create_time=timestamp(row.create_time),
        update_time=timestamp(row.update_time),
        updated_by=row.updated_by,
    )


def version_proto(row: VersionRow) -> secret_pb.SecretVersion:
    if row.destroy_time is not None:
        state = secret_pb.SECRET_VERSION_STATE_DESTROYED
    elif row.current:
        state = secret_pb.SECRET_VERSION_STATE_CURRENT
    else:
        state = secret_pb.SECRET_VERSION_STATE_SUPERSEDED
    return secret_pb.SecretVersion(
        version=row.version,
        state=state,
        create_time=timestamp(row.create_time),
        created_by=row.created_by,
        destroy_time=timestamp(row.destroy_time),
    )


def key_version_proto(view: KeyVersionView) -> key_ring_pb.KeyVersion:
    return key_ring_pb.KeyVersion(
        version=view.version,
        state=_KEY_STATES[view.state],
        usage_count=view.usage,
        fingerprint=view.fingerprint,
        retire_time=timestamp(view.retire_time),
    )


def audit_event_proto(row: AuditRow) -> audit_pb.AuditEvent:
    return audit_pb.AuditEvent(
        id=row.id,
        create_time=timestamp(row.create_time),
        organization_id=row.organization_id,
        action=row.action,
        key=row.key,
        secret_version=row.secret_version,
        operation=_OPERATIONS[Operation(row.operation)],
        caller=row.caller,
        outcome=_OUTCOMES[Outcome(row.outcome)],
        detail=row.detail,
    )


def operation_filter(number: int) -> str:
    """The stored name of an AuditOperation filter ('' for unspecified)."""
    if number == audit_pb.AUDIT_OPERATION_UNSPECIFIED:
        return ""
    if number not in _OPERATION_NAMES:
        raise invalid_field("operation", "is not a known AuditOperation")
    return _OPERATION_NAMES[number].value
