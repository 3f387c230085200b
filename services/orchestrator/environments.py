"""Which environment a call acts on, and whether the tenant's plan allows it.

Sandbox is a plan entitlement (SPEC §2): on `starter` every sandbox call
fails FAILED_PRECONDITION with reason SANDBOX_DISABLED. Plans come from the
tenants read model (the registry's topic), never the registry's tables.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from libs.errors import EventflowError, failed_precondition, invalid_field, not_found
from services.orchestrator.storage import read_models

ENVIRONMENTS = ("production", "sandbox")
SANDBOX_PLANS = ("team", "enterprise")
SANDBOX_DISABLED = "SANDBOX_DISABLED"


def environment_of(requested: str, field: str = "environment") -> str:
    """The requested environment, `production` when empty."""
    environment = requested or "production"
    if environment not in ENVIRONMENTS:
        raise invalid_field(field, "must be production or sandbox")
    return environment


def sandbox_refusal(plan: str) -> EventflowError:
    return failed_precondition(
        SANDBOX_DISABLED,
        f"the {plan} plan has no sandbox environment; upgrade to team or enterprise",
    )


async def require_environment(
    conn: AsyncConnection[Any], organization_id: str, project_id: str, environment: str
) -> None:
    """Refuse a sandbox call on a plan without a sandbox, and unknown projects."""
    if environment != "sandbox":
        return
    plans = await read_models.plans_for(conn, {(organization_id, project_id)})
    plan = plans.get((organization_id, project_id))
    if plan is None:
        raise not_found("project", project_id)
    if plan not in SANDBOX_PLANS:
        raise sandbox_refusal(plan)
