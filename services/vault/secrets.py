"""Secret use cases: set, list, delete, purge and resolve; each one transaction.

Values arrive and leave as ``SecretValue`` and are sealed before anything
touches storage. Every change and every read is audited in the transaction
that does it, so a read whose audit entry cannot be written returns nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from libs.auth import Principal
from libs.errors import EventflowError, invalid_field
from libs.pagination import decode_token, encode_token, page_size
from services.vault import errors
from services.vault.domain import rules
from services.vault.domain.audit import AuditEntry, Operation, Outcome
from services.vault.domain.envelope import (
    EnvelopeError,
    IntegrityError,
    SecretRecord,
    open_sealed,
    seal,
)
from services.vault.domain.key_ring import KeyRing
from services.vault.domain.values import SecretValue
from services.vault.storage.audit import AuditStore
from services.vault.storage.secrets import SecretRow, SecretStore, StoredVersion, VersionRow

# Integrity failures are alerts: someone changed the database underneath us.
log = logging.getLogger("eventflow.vault")


class CurrentKeyRing:
    """The key ring in use, shared by the use cases and replaced whole on reload."""

    def __init__(self, ring: KeyRing) -> None:
        self.ring = ring


@dataclass(frozen=True)
class ResolvedValue:
    key: str
    version: int
    value: SecretValue


class SecretVault:
    def __init__(self, store: SecretStore, audit: AuditStore, keys: CurrentKeyRing) -> None:
        self._store = store
        self._audit = audit
        self._keys = keys

    async def set_secret(
        self, who: Principal, org_id: str, action: str, key: str, value: SecretValue
    ) -> SecretRow:
        org = rules.organization_to_change(who, org_id)
        rules.validate_new_secret(action, key, value)
        kek = self._keys.ring.primary
        async with self._store.transaction() as conn:
            version = await self._store.next_version(conn, org, action, key, who.key_id)
            record = SecretRecord(org, action, key, version)
            await self._store.insert_version(
                conn, StoredVersion(record, seal(record, value, kek)), who.key_id
            )
            # After the insert: a concurrent retirement either saw our row or
            # is visible now (see SecretStore.block_writes).
            if await self._store.is_retired(conn, kek.version):
                raise errors.key_version_retired(kek.version)
            await self._audit.append(
                conn, [_entry(who, org, Operation.SET_SECRET, Outcome.OK, action, key, version)]
            )
            row = await self._store.get(conn, org, action, key)
        assert row is not None
        return row

    async def list_secrets(
        self, who: Principal, org_id: str, action: str, size: int, token: str
    ) -> tuple[list[SecretRow], str]:
        org = rules.organization_for(who, org_id)
        if action:
            rules.check(rules.action_violation(action))
        limit = page_size(size)
        cursor = decode_token(token, ("a", "k"))
        after = (cursor["a"], cursor["k"]) if cursor else None
        async with self._store.transaction() as conn:
            rows = await self._store.list_secrets(conn, org, action or None, after, limit + 1)
        if len(rows) <= limit:
            return rows, ""
        last = rows[limit - 1]
        return rows[:limit], encode_token({"a": last.action, "k": last.key})

    async def list_versions(
        self, who: Principal, org_id: str, action: str, key: str, size: int, token: str
    ) -> tuple[list[VersionRow], str]:
        org = rules.organization_for(who, org_id)
        rules.validate_secret_name(action, key)
        limit = page_size(size)
        cursor = decode_token(token, ("v",))
        async with self._store.transaction() as conn:
            secret = await self._store.get(conn, org, action, key)
            if secret is None:
                raise errors.secret_not_found(action, key)
            before = int(cursor["v"]) if cursor else None
            rows = await self._store.list_versions(conn, secret, before, limit + 1)
        if len(rows) <= limit:
            return rows, ""
        return rows[:limit], encode_token({"v": rows[limit - 1].version})

    async def delete_secret(self, who: Principal, org_id: str, action: str, key: str) -> int:
        """Stop serving the secret and destroy every version; returns how many."""
        destroyed, _ = await self._destroy(who, org_id, action, key, Operation.DELETE_SECRET)
        return destroyed

    async def purge_versions(
        self, who: Principal, org_id: str, action: str, key: str
    ) -> tuple[int, int]:
        """Destroy every version but the served one; returns (destroyed, served version)."""
        return await self._destroy(who, org_id, action, key, Operation.PURGE_SECRET_VERSIONS)

    async def _destroy(
        self, who: Principal, org_id: str, action: str, key: str, operation: Operation
    ) -> tuple[int, int]:
        org = rules.organization_to_change(who, org_id)
        rules.validate_secret_name(action, key)
        deleting = operation is Operation.DELETE_SECRET
        async with self._store.transaction() as conn:
            secret = await self._store.get(conn, org, action, key, lock=True)
            if secret is None:
                entry = _entry(who, org, operation, Outcome.NOT_FOUND, action, key)
                destroyed = 0
            else:
                below = None if deleting else secret.latest_version
                destroyed = await self._store.destroy_versions(conn, secret, below)
                if deleting:
                    await self._store.mark_deleted(conn, secret, who.key_id)
                entry = _entry(
                    who, org, operation, Outcome.OK, action, key, secret.latest_version,
                    f"{destroyed} version(s) destroyed",
                )  # fmt: skip
            await self._audit.append(conn, [entry])
        if secret is None:
            raise errors.secret_not_found(action, key)
        return destroyed, secret.latest_version

    async def resolve(
        self, who: Principal, org: str, action: str, keys: list[str], purpose: str
    ) -> list[ResolvedValue]:
        """The newest value of each stored key among ``keys``; absent keys are left out."""
        if not org:
            raise invalid_field("organization_id", "is required")
        wanted = rules.resolve_keys(action, keys, purpose)
        if not wanted:
            return []
        ring = self._keys.ring
        resolved: dict[str, ResolvedValue] = {}
        failures: list[EnvelopeError] = []
        async with self._store.transaction() as conn:
            for stored in await self._store.current_versions(conn, org, action, wanted):
                try:
                    value = open_sealed(stored.record, stored.sealed, ring)
                except EnvelopeError as failure:
                    failures.append(failure)
                    continue
                resolved[stored.record.key] = ResolvedValue(
                    stored.record.key, stored.record.version, value
                )
            await self._audit.append(
                conn, _resolve_entries(who, org, action, wanted, resolved, failures, purpose)
            )
        if failures:
            for problem in failures:
                log.error("vault: secret not served: %s", problem)
            raise _envelope_error(failures[0])
        return [resolved[k] for k in wanted if k in resolved]


def _entry(
    who: Principal,
    org: str,
    operation: Operation,
    outcome: Outcome,
    action: str = "",
    key: str = "",
    version: int = 0,
    detail: str = "",
) -> AuditEntry:
    return AuditEntry(org, operation, who.key_id, outcome, action, key, version, detail)


def failure_outcome(failure: EnvelopeError) -> Outcome:
    if isinstance(failure, IntegrityError):
        return Outcome.INTEGRITY_ERROR
    return Outcome.KEY_UNAVAILABLE


def _envelope_error(failure: EnvelopeError) -> EventflowError:
    record = failure.record
    if isinstance(failure, IntegrityError):
        return errors.integrity(record.action, record.key, record.version)
    return errors.key_version_unavailable(record.action, record.key, failure.kek_version)


def _resolve_entries(
    who: Principal,
    org: str,
    action: str,
    wanted: list[str],
    resolved: dict[str, ResolvedValue],
    failures: list[EnvelopeError],
    purpose: str,
) -> list[AuditEntry]:
    failed = {f.record.key: f for f in failures}
    entries = []
    for key in wanted:
        if key in resolved:
            outcome, version = Outcome.OK, resolved[key].version
        elif key in failed:
            outcome, version = failure_outcome(failed[key]), failed[key].record.version
        else:
            outcome, version = Outcome.NOT_FOUND, 0
        entries.append(_entry(who, org, Operation.RESOLVE, outcome, action, key, version, purpose))
    return entries
