"""Tenancy use cases: organizations (operator), projects and API keys (org admins).

Creating a project, and changing an organization's plan, write a
``TenantState`` record per affected project to the outbox in the same
transaction, so the tenants topic never misses or invents a change.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from eventflow.registry.v1 import tenant_state_pb2

from libs.auth import Principal, Role, hash_secret, new_api_key
from libs.auth.principal import ROLE_NAMES
from libs.errors import invalid_field, not_found
from libs.outbox import enqueue
from libs.pagination import decode_token, encode_token, page_size
from libs.timestamps import timestamp
from services.registry import errors
from services.registry.domain.tenancy import (
    organization_for,
    validate_plan,
    validate_slug,
)
from services.registry.events.tenant_topic import tenant_record
from services.registry.storage import SCHEMA
from services.registry.storage.tenancy import (
    ApiKeyRow,
    Conn,
    OrganizationRow,
    ProjectRow,
    TenancyStore,
)


class Tenancy:
    def __init__(self, store: TenancyStore, on_commit: Callable[[], None]) -> None:
        self._store = store
        # Wakes the outbox relay once a tenant change has committed.
        self._on_commit = on_commit

    async def create_organization(
        self, who: Principal, org_id: str, display_name: str, plan: str
    ) -> OrganizationRow:
        if not who.is_operator:
            raise errors.operator_only()
        validate_slug(org_id, "organization.id")
        return await self._store.create_organization(
            org_id, display_name.strip(), validate_plan(plan or "starter", "organization.plan")
        )

    async def get_organization(self, who: Principal, org_id: str) -> OrganizationRow:
        org_id = organization_for(who, org_id, "id")
        org = await self._store.get_organization(org_id)
        if org is None:
            raise not_found("organization", org_id)
        return org

    async def update_plan(self, who: Principal, org_id: str, plan: str) -> OrganizationRow:
        if not who.is_operator:
            raise errors.operator_only()
        plan = validate_plan(plan)
        async with self._store.transaction() as conn:
            org = await self._store.lock_organization(conn, org_id, exclusive=True)
            if org is None:
                raise not_found("organization", org_id)
            if org.plan == plan:
                return org
            org = await self._store.set_plan(conn, org_id, plan)
            now = datetime.now(UTC)
            for project in await self._store.projects_of(conn, org_id):
                await _enqueue_tenant(conn, org, project.id, now)
        self._on_commit()
        return org

    async def create_project(
        self, who: Principal, org_id: str, project_id: str, display_name: str
    ) -> ProjectRow:
        org_id = await self._admin_org(who, org_id)
        validate_slug(project_id, "project.id")
        async with self._store.transaction() as conn:
            org = await self._store.lock_organization(conn, org_id, exclusive=False)
            if org is None:
                raise not_found("organization", org_id)
            project = await self._store.create_project(
                conn, org_id, project_id, display_name.strip()
            )
            await _enqueue_tenant(conn, org, project.id, project.create_time)
        self._on_commit()
        return project

    async def announce_existing_projects(self) -> int:
        """Publish the projects created before the tenants topic existed; returns how many.

        Run at start-up; after the first run there is nothing left to do.
        """
        async with self._store.transaction() as conn:
            pairs = await self._store.take_unannounced_projects(conn)
            orgs: dict[str, OrganizationRow | None] = {}
            now = datetime.now(UTC)
            for org_id, project_id in pairs:
                if org_id not in orgs:
                    orgs[org_id] = await self._store.lock_organization(
                        conn, org_id, exclusive=False
                    )
                org = orgs[org_id]
                assert org is not None, "projects reference their organization"
                await _enqueue_tenant(conn, org, project_id, now)
        if pairs:
            self._on_commit()
        return len(pairs)

    async def list_projects(
        self, who: Principal, org_id: str, size: int, token: str
    ) -> tuple[list[ProjectRow], str]:
        org_id = organization_for(who, org_id)
        limit = page_size(size)
        cursor = decode_token(token, ("after",))
        rows = await self._store.list_projects(
            org_id, cursor["after"] if cursor else None, limit + 1
        )
        if who.project_id:
            rows = [r for r in rows if r.id == who.project_id]
        more = len(rows) > limit
        return rows[:limit], encode_token({"after": rows[limit - 1].id}) if more else ""

    async def create_api_key(
        self, who: Principal, org_id: str, project_id: str, role: str, description: str
    ) -> tuple[ApiKeyRow, str]:
        org_id = await self._admin_org(who, org_id)
        if role not in ROLE_NAMES:
            raise invalid_field("role", f"must be one of {', '.join(ROLE_NAMES)}; got {role!r}")
        if who.project_id and project_id != who.project_id:
            # A project-bound admin cannot mint keys wider than its own.
            raise errors.project_not_allowed(project_id or "*")
        if project_id and await self._store.get_project(org_id, project_id) is None:
            raise not_found("project", project_id)
        key = new_api_key()
        row = await self._store.create_api_key(
            key.key_id, org_id, project_id or None, role, hash_secret(key.secret), description
        )
        return row, key.token

    async def list_api_keys(
        self, who: Principal, org_id: str, size: int, token: str
    ) -> tuple[list[ApiKeyRow], str]:
        org_id = await self._admin_org(who, org_id)
        limit = page_size(size)
        cursor = decode_token(token, ("after",))
        rows = await self._store.list_api_keys(
            org_id, cursor["after"] if cursor else None, limit + 1
        )
        more = len(rows) > limit
        return rows[:limit], encode_token({"after": rows[limit - 1].id}) if more else ""

    async def revoke_api_key(self, who: Principal, key_id: str) -> ApiKeyRow:
        org_id = await self._admin_org(who, "")
        row = await self._store.revoke_api_key(org_id, key_id)
        if row is None:
            raise not_found("api key", key_id)
        return row

    async def _admin_org(self, who: Principal, org_id: str) -> str:
        """Admins act on their own organization; the operator on any existing one."""
        if who.role < Role.ADMIN:
            raise errors.EventflowError(
                errors.grpc.StatusCode.PERMISSION_DENIED,
                "ROLE_TOO_LOW",
                "this call needs the admin role",
            )
        org_id = organization_for(who, org_id)
        if who.is_operator and await self._store.get_organization(org_id) is None:
            raise not_found("organization", org_id)
        return org_id


async def _enqueue_tenant(
    conn: Conn, org: OrganizationRow, project_id: str, change_time: datetime
) -> None:
    state = tenant_state_pb2.TenantState(
        organization_id=org.id,
        project_id=project_id,
        plan=org.plan,
        revision=org.revision,
        change_time=timestamp(change_time),
    )
    await enqueue(conn, SCHEMA, *tenant_record(state))
