"""Secrets and their encrypted versions in PostgreSQL.

Methods take the connection of the caller's transaction, so a use case (set:
bump the version, store the envelope, check the key, audit) commits or rolls
back as a whole. Only sealed envelopes pass through here, never a value.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from libs.db import transaction
from services.vault.domain.envelope import Sealed, SecretRecord

Conn = AsyncConnection[Any]

_ENVELOPE = "format, kek_version, dek_nonce, wrapped_dek, value_nonce, ciphertext"


@dataclass(frozen=True)
class SecretRow:
    organization_id: str
    action: str
    key: str
    latest_version: int
    create_time: datetime
    update_time: datetime
    updated_by: str


@dataclass(frozen=True)
class VersionRow:
    version: int
    created_by: str
    create_time: datetime
    destroy_time: datetime | None
    current: bool


@dataclass(frozen=True)
class StoredVersion:
    """A live secret version's envelope and the record it must belong to."""

    record: SecretRecord
    sealed: Sealed


_SECRET_COLUMNS = (
    "organization_id, action, key, latest_version, create_time, update_time, updated_by"
)


class SecretStore:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    def transaction(self) -> AbstractAsyncContextManager[Conn]:
        return transaction(self._pool)

    async def next_version(self, conn: Conn, org: str, action: str, key: str, who: str) -> int:
        """Claim the next version number (row-locked until commit)."""
        cur = await conn.execute(
            "INSERT INTO vault.secrets (organization_id, action, key, latest_version, updated_by)"
            " VALUES (%s, %s, %s, 1, %s)"
            " ON CONFLICT (organization_id, action, key) DO UPDATE SET"
            "  latest_version = vault.secrets.latest_version + 1,"
            "  update_time = now(), updated_by = excluded.updated_by, delete_time = NULL,"
            "  create_time = CASE WHEN vault.secrets.delete_time IS NULL"
            "   THEN vault.secrets.create_time ELSE now() END"
            " RETURNING latest_version",
            (org, action, key, who),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row["latest_version"])

    async def insert_version(self, conn: Conn, stored: StoredVersion, who: str) -> None:
        r, s = stored.record, stored.sealed
        await conn.execute(
            "INSERT INTO vault.secret_versions (organization_id, action, key, version, created_by,"
            f" {_ENVELOPE}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                r.organization_id,
                r.action,
                r.key,
                r.version,
                who,
                s.format,
                s.kek_version,
                s.dek_nonce,
                s.wrapped_dek,
                s.value_nonce,
                s.ciphertext,
            ),
        )

    async def get(
        self, conn: Conn, org: str, action: str, key: str, *, lock: bool = False
    ) -> SecretRow | None:
        cur = await conn.execute(
            f"SELECT {_SECRET_COLUMNS} FROM vault.secrets WHERE organization_id = %s"
            " AND action = %s AND key = %s AND delete_time IS NULL"
            + (" FOR UPDATE" if lock else ""),
            (org, action, key),
        )
        row = await cur.fetchone()
        return SecretRow(**row) if row else None

    async def list_secrets(
        self,
        conn: Conn,
        org: str,
        action: str | None,
        after: tuple[str, str] | None,
        limit: int,
    ) -> list[SecretRow]:
        clauses, params = ["organization_id = %s", "delete_time IS NULL"], [org]
        if action is not None:
            clauses.append("action = %s")
            params.append(action)
        if after is not None:
            clauses.append("(action, key) > (%s, %s)")
            params.extend(after)
        cur = await conn.execute(
            f"SELECT {_SECRET_COLUMNS} FROM vault.secrets WHERE {' AND '.join(clauses)}"
            " ORDER BY action, key LIMIT %s",
            (*params, limit),
        )
        return [SecretRow(**r) for r in await cur.fetchall()]

    async def list_versions(
        self, conn: Conn, secret: SecretRow, before: int | None, limit: int
    ) -> list[VersionRow]:
        cur = await conn.execute(
            "SELECT version, created_by, create_time, destroy_time, version = %s AS current"
            " FROM vault.secret_versions WHERE organization_id = %s AND action = %s AND key = %s"
            " AND version < %s ORDER BY version DESC LIMIT %s",
            (
                secret.latest_version,
                secret.organization_id,
                secret.action,
                secret.key,
                before if before is not None else secret.latest_version + 1,
                limit,
            ),
        )
        return [VersionRow(**r) for r in await cur.fetchall()]

    async def current_versions(
        self, conn: Conn, org: str, action: str, keys: list[str]
    ) -> list[StoredVersion]:
        """The served version of each of ``keys`` that exists."""
        cur = await conn.execute(
            "SELECT v.organization_id, v.action, v.key, v.version,"
            f" {', '.join('v.' + c for c in _ENVELOPE.split(', '))}"
            " FROM vault.secrets s JOIN vault.secret_versions v"
            "  ON v.organization_id = s.organization_id AND v.action = s.action"
            "  AND v.key = s.key AND v.version = s.latest_version"
            " WHERE s.organization_id = %s AND s.action = %s AND s.key = ANY(%s)"
            " AND s.delete_time IS NULL AND v.ciphertext IS NOT NULL",
            (org, action, keys),
        )
        return [_stored(r) for r in await cur.fetchall()]

    async def mark_deleted(self, conn: Conn, secret: SecretRow, who: str) -> None:
        await conn.execute(
            "UPDATE vault.secrets SET delete_time = now(), update_time = now(), updated_by = %s"
            " WHERE organization_id = %s AND action = %s AND key = %s",
            (who, secret.organization_id, secret.action, secret.key),
        )

    async def destroy_versions(self, conn: Conn, secret: SecretRow, below: int | None) -> int:
        """Destroy the envelopes of every version (or every version below ``below``)."""
        cur = await conn.execute(
            "UPDATE vault.secret_versions SET format = NULL, kek_version = NULL,"
            " dek_nonce = NULL, wrapped_dek = NULL, value_nonce = NULL, ciphertext = NULL,"
            " destroy_time = now()"
            " WHERE organization_id = %s AND action = %s AND key = %s AND version < %s"
            " AND ciphertext IS NOT NULL",
            (
                secret.organization_id,
                secret.action,
                secret.key,
                below if below is not None else secret.latest_version + 1,
            ),
        )
        return cur.rowcount

    # ------------------------------------------------------------ key ring

    async def usage_by_key_version(self, conn: Conn) -> dict[int, int]:
        cur = await conn.execute(
            "SELECT kek_version, count(*) AS usage FROM vault.secret_versions"
            " WHERE kek_version IS NOT NULL GROUP BY kek_version"
        )
        return {int(r["kek_version"]): int(r["usage"]) for r in await cur.fetchall()}

    async def block_writes(self, conn: Conn) -> None:
        """Hold off every insert and update of versions until this transaction ends.

        Retiring a key version checks "no row uses it" under this lock, and
        writers check "my key version is not retired" after their write, so
        no row can be written with a version retired concurrently.
        """
        await conn.execute("LOCK TABLE vault.secret_versions IN SHARE MODE")

    async def retired_versions(self, conn: Conn) -> dict[int, datetime]:
        cur = await conn.execute("SELECT version, retire_time FROM vault.retired_key_versions")
        return {int(r["version"]): r["retire_time"] for r in await cur.fetchall()}

    async def is_retired(self, conn: Conn, version: int) -> bool:
        cur = await conn.execute(
            "SELECT 1 FROM vault.retired_key_versions WHERE version = %s", (version,)
        )
        return await cur.fetchone() is not None

    async def retire(self, conn: Conn, version: int, who: str) -> datetime:
        cur = await conn.execute(
            "INSERT INTO vault.retired_key_versions (version, retired_by) VALUES (%s, %s)"
            " ON CONFLICT (version) DO UPDATE SET version = excluded.version"
            " RETURNING retire_time",
            (version, who),
        )
        row = await cur.fetchone()
        assert row is not None
        retired: datetime = row["retire_time"]
        return retired

    async def versions_to_rewrap(
        self, conn: Conn, primary: int, after: tuple[str, str, str, int] | None, limit: int
    ) -> list[StoredVersion]:
        """Live versions not wrapped by ``primary``, in key order, locked for update."""
        clause = ""
        params: list[Any] = []
        if after is not None:
            clause = " AND (organization_id, action, key, version) > (%s, %s, %s, %s)"
            params = list(after)
        cur = await conn.execute(
            f"SELECT organization_id, action, key, version, {_ENVELOPE}"
            " FROM vault.secret_versions WHERE kek_version IS NOT NULL AND kek_version <> %s"
            f"{clause} ORDER BY organization_id, action, key, version LIMIT %s FOR UPDATE",
            (primary, *params, limit),
        )
        return [_stored(r) for r in await cur.fetchall()]

    async def replace_wrapping(self, conn: Conn, stored: StoredVersion) -> None:
        r, s = stored.record, stored.sealed
        await conn.execute(
            "UPDATE vault.secret_versions SET kek_version = %s, dek_nonce = %s, wrapped_dek = %s"
            " WHERE organization_id = %s AND action = %s AND key = %s AND version = %s",
            (
                s.kek_version,
                s.dek_nonce,
                s.wrapped_dek,
                r.organization_id,
                r.action,
                r.key,
                r.version,
            ),
        )


def _stored(row: dict[str, Any]) -> StoredVersion:
    return StoredVersion(
        SecretRecord(row["organization_id"], row["action"], row["key"], row["version"]),
        Sealed(
            format=row["format"],
            kek_version=row["kek_version"],
            dek_nonce=bytes(row["dek_nonce"]),
            wrapped_dek=bytes(row["wrapped_dek"]),
            value_nonce=bytes(row["value_nonce"]),
            ciphertext=bytes(row["ciphertext"]),
        ),
    )
