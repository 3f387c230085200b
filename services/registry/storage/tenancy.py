"""Organizations, projects and API keys in PostgreSQL.

Changes that publish a TenantState record (project creation, plan change)
take the connection of the caller's transaction, so the outbox record
commits with them.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from libs.auth import KeyRecord, Role
from libs.db import transaction
from libs.errors import already_exists

Conn = AsyncConnection[Any]


@dataclass(frozen=True)
class OrganizationRow:
    id: str
    display_name: str
    plan: str
    create_time: datetime
    # Bumped on every plan change; orders the tenants topic's records.
    revision: int


@dataclass(frozen=True)
class ProjectRow:
    organization_id: str
    id: str
    display_name: str
    create_time: datetime


@dataclass(frozen=True)
class ApiKeyRow:
    id: str
    organization_id: str
    project_id: str | None
    role: str
    description: str
    create_time: datetime
    revoked: bool


class TenancyStore:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    def transaction(self) -> AbstractAsyncContextManager[Conn]:
        return transaction(self._pool)

    async def create_organization(
        self, org_id: str, display_name: str, plan: str
    ) -> OrganizationRow:
        try:
            row = await self._one(
                "INSERT INTO registry.organizations (id, display_name, plan) VALUES (%s, %s, %s)"
                " RETURNING *",
                (org_id, display_name, plan),
            )
        except psycopg.errors.UniqueViolation:
            raise already_exists("organization", org_id) from None
        return OrganizationRow(**row)

    async def get_organization(self, org_id: str) -> OrganizationRow | None:
        row = await self._maybe("SELECT * FROM registry.organizations WHERE id = %s", (org_id,))
        return OrganizationRow(**row) if row else None

    async def lock_organization(
        self, conn: Conn, org_id: str, *, exclusive: bool
    ) -> OrganizationRow | None:
        """Read an organization, locked until the transaction ends.

        A plan change locks it exclusively and a project creation shared, so
        a project created during a plan change is either among the projects
        the change publishes or reads the new plan itself.
        """
        cur = await conn.execute(
            "SELECT * FROM registry.organizations WHERE id = %s"
            + (" FOR UPDATE" if exclusive else " FOR SHARE"),
            (org_id,),
        )
        row = await cur.fetchone()
        return OrganizationRow(**row) if row else None

    async def set_plan(self, conn: Conn, org_id: str, plan: str) -> OrganizationRow:
        cur = await conn.execute(
            "UPDATE registry.organizations SET plan = %s, revision = revision + 1"
            " WHERE id = %s RETURNING *",
            (plan, org_id),
        )
        return OrganizationRow(**await cur.fetchone())  # type: ignore[arg-type]

    async def create_project(
        self, conn: Conn, org_id: str, project_id: str, display_name: str
    ) -> ProjectRow:
        try:
            cur = await conn.execute(
                "INSERT INTO registry.projects (organization_id, id, display_name)"
                " VALUES (%s, %s, %s) RETURNING *",
                (org_id, project_id, display_name),
            )
        except psycopg.errors.UniqueViolation:
            raise already_exists("project", project_id) from None
        return ProjectRow(**await cur.fetchone())  # type: ignore[arg-type]

    async def projects_of(self, conn: Conn, org_id: str) -> list[ProjectRow]:
        cur = await conn.execute(
            "SELECT * FROM registry.projects WHERE organization_id = %s ORDER BY id", (org_id,)
        )
        return [ProjectRow(**r) for r in await cur.fetchall()]

    async def take_unannounced_projects(self, conn: Conn) -> list[tuple[str, str]]:
        """(organization, project) pairs that predate the tenants topic; removed as read.

        Concurrent starters block on the deleted rows and then find none, so
        each project is announced by one of them.
        """
        cur = await conn.execute(
            "DELETE FROM registry.unannounced_projects RETURNING organization_id, project_id"
        )
        return sorted((r["organization_id"], r["project_id"]) for r in await cur.fetchall())

    async def get_project(self, org_id: str, project_id: str) -> ProjectRow | None:
        row = await self._maybe(
            "SELECT * FROM registry.projects WHERE organization_id = %s AND id = %s",
            (org_id, project_id),
        )
        return ProjectRow(**row) if row else None

    async def list_projects(self, org_id: str, after: str | None, limit: int) -> list[ProjectRow]:
        rows = await self._all(
            "SELECT * FROM registry.projects WHERE organization_id = %s AND id > %s"
            " ORDER BY id LIMIT %s",
            (org_id, after or "", limit),
        )
        return [ProjectRow(**r) for r in rows]

    async def create_api_key(
        self,
        key_id: str,
        org_id: str,
        project_id: str | None,
        role: str,
        secret_hash: bytes,
        description: str,
    ) -> ApiKeyRow:
        row = await self._one(
            "INSERT INTO registry.api_keys"
            " (id, organization_id, project_id, role, secret_hash, description)"
            " VALUES (%s, %s, %s, %s, %s, %s) RETURNING *",
            (key_id, org_id, project_id, role, secret_hash, description),
        )
        return _key_row(row)

    async def list_api_keys(self, org_id: str, after: str | None, limit: int) -> list[ApiKeyRow]:
        rows = await self._all(
            "SELECT * FROM registry.api_keys WHERE organization_id = %s AND id > %s"
            " ORDER BY id LIMIT %s",
            (org_id, after or "", limit),
        )
        return [_key_row(r) for r in rows]

    async def revoke_api_key(self, org_id: str, key_id: str) -> ApiKeyRow | None:
        row = await self._maybe(
            "UPDATE registry.api_keys SET revoke_time = coalesce(revoke_time, now())"
            " WHERE organization_id = %s AND id = %s RETURNING *",
            (org_id, key_id),
        )
        return _key_row(row) if row else None

    async def find_key(self, key_id: str) -> KeyRecord | None:
        row = await self._maybe("SELECT * FROM registry.api_keys WHERE id = %s", (key_id,))
        if row is None:
            return None
        return KeyRecord(
            key_id=row["id"],
            organization_id=row["organization_id"],
            project_id=row["project_id"],
            role=Role.parse(row["role"]),
            secret_hash=bytes(row["secret_hash"]),
            revoked=row["revoke_time"] is not None,
        )

    async def _one(self, query: str, params: tuple[Any, ...]) -> dict[str, Any]:
        row = await self._maybe(query, params)
        assert row is not None
        return row

    async def _maybe(self, query: str, params: tuple[Any, ...]) -> dict[str, Any] | None:
        async with self._pool.connection() as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchone()  # type: ignore[return-value]

    async def _all(self, query: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchall()  # type: ignore[return-value]


def _key_row(row: dict[str, Any]) -> ApiKeyRow:
    return ApiKeyRow(
        id=row["id"],
        organization_id=row["organization_id"],
        project_id=row["project_id"],
        role=row["role"],
        description=row["description"],
        create_time=row["create_time"],
        revoked=row["revoke_time"] is not None,
    )
