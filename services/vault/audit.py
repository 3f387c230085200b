"""Reading the audit log (organization admins, the operator) and recording refusals."""

from __future__ import annotations

from libs.auth import Principal
from libs.pagination import decode_token, encode_token, page_size
from services.vault.domain import rules
from services.vault.domain.audit import PLATFORM, AuditEntry
from services.vault.storage.audit import AuditFilter, AuditRow, AuditStore
from services.vault.storage.secrets import SecretStore


class AuditTrail:
    def __init__(self, store: SecretStore, audit: AuditStore) -> None:
        # The secret store only lends its transactions.
        self._store = store
        self._audit = audit

    async def list_events(
        self,
        who: Principal,
        org_id: str,
        filters: dict[str, str],
        size: int,
        token: str,
    ) -> tuple[list[AuditRow], str]:
        """Newest first. The operator's empty organization means platform entries."""
        org = org_id if who.is_operator else rules.organization_for(who, org_id)
        where = AuditFilter(organization_id=org or PLATFORM, **filters)
        limit = page_size(size)
        cursor = decode_token(token, ("before",))
        before = int(cursor["before"]) if cursor else None
        async with self._store.transaction() as conn:
            rows = await self._audit.list_events(conn, where, before, limit + 1)
        if len(rows) <= limit:
            return rows, ""
        return rows[:limit], encode_token({"before": rows[limit - 1].id})

    async def record(self, entry: AuditEntry) -> None:
        async with self._store.transaction() as conn:
            await self._audit.append(conn, [entry])
