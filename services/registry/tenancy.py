"""Tenancy use cases: organizations (operator), projects and API keys (org admins)."""

from __future__ import annotations

from libs.auth import Principal, Role, hash_secret, new_api_key
from libs.auth.principal import ROLE_NAMES
from libs.errors import invalid_field, not_found
from libs.pagination import decode_token, encode_token, page_size
from services.registry import errors
from services.registry.domain.tenancy import (
    organization_for,
    validate_plan,
    validate_slug,
)
from services.registry.storage.tenancy import (
    ApiKeyRow,
    OrganizationRow,
    ProjectRow,
    TenancyStore,
)


class Tenancy:
    def __init__(self, store: TenancyStore) -> None:
        self._store = store

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
        org = await self._store.update_plan(org_id, validate_plan(plan))
        if org is None:
            raise not_found("organization", org_id)
        return org

    async def create_project(
        self, who: Principal, org_id: str, project_id: str, display_name: str
    ) -> ProjectRow:
        org_id = await self._admin_org(who, org_id)
        validate_slug(project_id, "project.id")
        return await self._store.create_project(org_id, project_id, display_name.strip())

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
