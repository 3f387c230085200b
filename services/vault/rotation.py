"""Key ring use cases for the operator: usage per key version, Rewrap, retire.

Rewrap walks the live secret versions not wrapped by the primary in key
order, a batch per transaction (row-locked, so concurrent Rewraps and
deletes wait rather than clash), and re-wraps each data key. Readers never
block on it: each row changes in one update, so a Resolve sees the old or
the new wrapping, both of which open.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from libs.auth import Principal
from libs.errors import EventflowError
from services.vault import errors
from services.vault.domain.audit import PLATFORM, AuditEntry, Operation, Outcome
from services.vault.domain.envelope import EnvelopeError, rewrap
from services.vault.domain.rules import check_retirable
from services.vault.secrets import CurrentKeyRing, failure_outcome
from services.vault.storage.audit import AuditStore
from services.vault.storage.secrets import SecretStore, StoredVersion

log = logging.getLogger("eventflow.vault")

REWRAP_BATCH = 200


@dataclass(frozen=True)
class KeyVersionView:
    version: int
    # primary | decrypt_only | retired | missing
    state: str
    usage: int
    fingerprint: str
    retire_time: datetime | None


@dataclass(frozen=True)
class RewrapResult:
    primary: int
    rewrapped: int
    failed: int


class KeyRotation:
    def __init__(
        self,
        store: SecretStore,
        audit: AuditStore,
        keys: CurrentKeyRing,
        batch_size: int = REWRAP_BATCH,
    ) -> None:
        self._store = store
        self._audit = audit
        self._keys = keys
        self._batch_size = batch_size

    async def key_versions(self, who: Principal) -> tuple[list[KeyVersionView], int]:
        """Every configured, used or retired version, newest first; and the primary."""
        _operator(who)
        async with self._store.transaction() as conn:
            usage = await self._store.usage_by_key_version(conn)
            retired = await self._store.retired_versions(conn)
        ring = self._keys.ring
        versions = sorted({*ring.versions, *usage, *retired}, reverse=True)
        return [self._view(v, usage, retired) for v in versions], ring.primary.version

    async def rewrap(self, who: Principal) -> RewrapResult:
        _operator(who)
        ring = self._keys.ring
        primary = ring.primary
        rewrapped = failed = 0
        summary_outcome = Outcome.OK
        after: tuple[str, str, str, int] | None = None
        while True:
            async with self._store.transaction() as conn:
                batch = await self._store.versions_to_rewrap(
                    conn, primary.version, after, self._batch_size
                )
                if not batch:
                    break
                entries = []
                for stored in batch:
                    record, old = stored.record, stored.sealed.kek_version
                    detail = f"key version {old} -> {primary.version}"
                    try:
                        sealed = rewrap(record, stored.sealed, ring, primary)
                    except EnvelopeError as failure:
                        log.error("vault: rewrap skipped a secret: %s", failure)
                        outcome = summary_outcome = failure_outcome(failure)
                        failed += 1
                    else:
                        await self._store.replace_wrapping(conn, StoredVersion(record, sealed))
                        outcome = Outcome.OK
                        rewrapped += 1
                    entries.append(
                        AuditEntry(
                            record.organization_id, Operation.REWRAP, who.key_id, outcome,
                            record.action, record.key, record.version, detail,
                        )
                    )  # fmt: skip
                if await self._store.is_retired(conn, primary.version):
                    raise errors.key_version_retired(primary.version)
                await self._audit.append(conn, entries)
            last = batch[-1].record
            after = (last.organization_id, last.action, last.key, last.version)
        summary = f"{rewrapped} secret version(s) re-wrapped to key version {primary.version}"
        async with self._store.transaction() as conn:
            await self._audit.append(
                conn,
                [
                    AuditEntry(
                        PLATFORM,
                        Operation.REWRAP,
                        who.key_id,
                        summary_outcome,
                        detail=f"{summary}; {failed} failed",
                    )
                ],
            )
        log.info("vault: %s; %d failed", summary, failed)
        return RewrapResult(primary.version, rewrapped, failed)

    async def retire(self, who: Principal, version: int) -> KeyVersionView:
        _operator(who)
        ring = self._keys.ring
        refusal: EventflowError | None = None
        async with self._store.transaction() as conn:
            await self._store.block_writes(conn)
            usage = await self._store.usage_by_key_version(conn)
            retired = await self._store.retired_versions(conn)
            if version not in {*ring.versions, *usage, *retired}:
                refusal = errors.key_version_not_found(version)
            else:
                try:
                    check_retirable(version, ring.primary.version, usage.get(version, 0))
                except EventflowError as error:
                    refusal = error
            if refusal is None:
                retired[version] = await self._store.retire(conn, version, who.key_id)
                await self._audit.append(conn, [_retire_entry(who, version, Outcome.OK, "")])
        if refusal is not None:
            async with self._store.transaction() as conn:
                entry = _retire_entry(who, version, Outcome.REFUSED, refusal.message)
                await self._audit.append(conn, [entry])
            raise refusal
        log.info("vault: key version %d retired", version)
        return self._view(version, usage, retired)

    def _view(
        self, version: int, usage: dict[int, int], retired: dict[int, datetime]
    ) -> KeyVersionView:
        ring = self._keys.ring
        key = ring.get(version)
        if version in retired:
            state = "retired"
        elif version == ring.primary.version:
            state = "primary"
        elif key is not None:
            state = "decrypt_only"
        else:
            state = "missing"
        return KeyVersionView(
            version,
            state,
            usage.get(version, 0),
            key.fingerprint if key else "",
            retired.get(version),
        )


def _operator(who: Principal) -> None:
    if not who.is_operator:
        raise errors.operator_only()


def _retire_entry(who: Principal, version: int, outcome: Outcome, detail: str) -> AuditEntry:
    return AuditEntry(
        PLATFORM,
        Operation.RETIRE_KEY_VERSION,
        who.key_id,
        outcome,
        detail=f"key version {version}" + (f": {detail}" if detail else ""),
    )
