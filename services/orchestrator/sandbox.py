"""Resetting a project's sandbox (SPEC §7): its data goes, production stays."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

from libs.auth import Principal
from libs.auth.scope import organization_of, project_scope
from libs.db import transaction
from services.orchestrator.environments import require_environment
from services.orchestrator.storage.sandbox import SandboxCounts, delete_sandbox


class Sandbox:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def reset(self, who: Principal, project: str) -> SandboxCounts:
        """Delete the project's sandbox events, instances, dead letters and projections."""
        org, project_id = organization_of(who), project_scope(who, project)
        assert project_id is not None
        async with transaction(self._pool) as conn:
            await require_environment(conn, org, project_id, "sandbox")
            return await delete_sandbox(conn, org, project_id)
