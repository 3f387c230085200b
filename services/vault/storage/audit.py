"""The append-only audit log in PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection

from services.vault.domain.audit import AuditEntry

Conn = AsyncConnection[Any]


@dataclass(frozen=True)
class AuditRow:
    id: int
    create_time: datetime
    organization_id: str
    action: str
    key: str
    secret_version: int
    operation: str
    caller: str
    outcome: str
    detail: str


@dataclass(frozen=True)
class AuditFilter:
    organization_id: str
    action: str = ""
    key: str = ""
    operation: str = ""


class AuditStore:
    async def append(self, conn: Conn, entries: list[AuditEntry]) -> None:
        if not entries:
            return
        async with conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO vault.audit_events (organization_id, action, key, secret_version,"
                " operation, caller, outcome, detail) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        e.organization_id,
                        e.action,
                        e.key,
                        e.secret_version,
                        e.operation.value,
                        e.caller,
                        e.outcome.value,
                        e.detail,
                    )
                    for e in entries
                ],
            )

    async def list_events(
        self, conn: Conn, where: AuditFilter, before: int | None, limit: int
    ) -> list[AuditRow]:
        clauses: list[str] = ["organization_id = %s"]
        params: list[Any] = [where.organization_id]
        for column in ("action", "key", "operation"):
            value = getattr(where, column)
            if value:
                clauses.append(f"{column} = %s")
                params.append(value)
        if before is not None:
            clauses.append("id < %s")
            params.append(before)
        cur = await conn.execute(
            "SELECT id, create_time, organization_id, action, key, secret_version, operation,"
            f" caller, outcome, detail FROM vault.audit_events WHERE {' AND '.join(clauses)}"
            " ORDER BY id DESC LIMIT %s",
            (*params, limit),
        )
        return [AuditRow(**r) for r in await cur.fetchall()]
