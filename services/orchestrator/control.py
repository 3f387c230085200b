"""Pause, resume and cancel: one instance, or a scope (subject, project, organization).

Pausing never interrupts a running step; the worker holds the instance at
its next step boundary (runner/worker.py `_may_start_step`). A scope pause
also places a hold, so instances started in the scope later hold too.
Scope resume lifts the hold and resumes only the instances that scope
paused; an instance paused by id, or by a narrower hold, stays paused.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from psycopg_pool import AsyncConnectionPool

from libs.auth import Principal, Role
from libs.auth.scope import organization_of, project_scope
from libs.db import transaction
from libs.errors import failed_precondition, invalid_field, not_found, permission_denied
from services.orchestrator.runner.worker import OUTCOMES
from services.orchestrator.storage import holds, instances
from services.orchestrator.storage.events import Conn
from services.orchestrator.storage.holds import HoldRow, Scope
from services.orchestrator.storage.instances import TERMINAL, InstanceRow

INSTANCE_TERMINAL = "INSTANCE_TERMINAL"


def scope_of(who: Principal, project_id: str, subject: str, organization: bool) -> Scope:
    """The scope a request names; organization scope (emergency stop) needs `admin`."""
    org = organization_of(who)
    if organization:
        if subject:
            raise invalid_field("scope.subject", "cannot be combined with scope.organization")
        if who.role < Role.ADMIN:
            raise permission_denied("ROLE_TOO_LOW", "organization scope needs the admin role")
        if who.project_id:
            raise permission_denied(
                "PROJECT_KEY", "a key bound to one project cannot act on the whole organization"
            )
        return Scope(org)
    project = project_scope(who, project_id)
    assert project is not None
    if len(subject) > 512:
        raise invalid_field("scope.subject", "must be at most 512 characters")
    return Scope(org, project, subject)


def _matching(scope: Scope) -> tuple[str, tuple[str, ...]]:
    clauses, params = ["organization_id = %s"], [scope.organization_id]
    if scope.project_id:
        clauses.append("project_id = %s")
        params.append(scope.project_id)
    if scope.subject:
        clauses.append("subject = %s")
        params.append(scope.subject)
    return " AND ".join(clauses), tuple(params)


class Control:
    def __init__(self, pool: AsyncConnectionPool, on_resumed: Callable[[], None]) -> None:
        self._pool = pool
        # Wakes this process's workers: resumed instances may be due now.
        self._on_resumed = on_resumed

    async def pause(self, who: Principal, instance_id: str) -> InstanceRow:
        async with transaction(self._pool) as conn:
            instance = await self._locked(conn, who, instance_id)
            if instance.status == "paused":
                return instance
            await instances.append(conn, instance.id, "instance_paused", detail={"by": "instance"})
            return await instances.update(
                conn, instance.id, status="paused", pause_reason="instance"
            )

    async def resume(self, who: Principal, instance_id: str) -> InstanceRow:
        async with transaction(self._pool) as conn:
            instance = await self._locked(conn, who, instance_id)
            if instance.status != "paused":
                raise failed_precondition(
                    "INSTANCE_NOT_PAUSED", f"instance {instance_id} is {instance.status}"
                )
            held = await holds.holding(conn, instance.id)
            if held == "workflow":
                raise failed_precondition(
                    "WORKFLOW_DISABLED", "its workflow is disabled; enable the workflow to resume"
                )
            if held is not None:
                raise failed_precondition(
                    "INSTANCE_HELD", f"its {held} is paused; resume the {held} to resume it"
                )
            await instances.append(conn, instance.id, "instance_resumed", detail={"by": "instance"})
            resumed = await instances.update(conn, instance.id, status="running", pause_reason=None)
        self._on_resumed()
        return resumed

    async def cancel(self, who: Principal, instance_id: str) -> InstanceRow:
        async with transaction(self._pool) as conn:
            instance = await self._locked(conn, who, instance_id)
            await instances.append(conn, instance.id, "instance_canceled")
            # A worker still running a step finds the claim gone and drops its outcome.
            canceled = await instances.update(
                conn,
                instance.id,
                status="canceled",
                pause_reason=None,
                waiting=False,
                claimed_by=None,
                claim_expires=None,
            )
        OUTCOMES.add(1, {"status": "canceled"})
        return canceled

    async def pause_scope(self, who: Principal, scope: Scope) -> tuple[int, HoldRow]:
        where, params = _matching(scope)
        async with transaction(self._pool) as conn:
            hold = await holds.place(conn, scope, who.key_id)
            paused = await instances.transition_many(
                conn,
                f"{where} AND status = 'running'",
                params,
                {"status": "paused", "pause_reason": scope.kind},
                "instance_paused",
                {"by": scope.kind},
            )
        return len(paused), hold

    async def resume_scope(self, who: Principal, scope: Scope) -> int:
        where, params = _matching(scope)
        async with transaction(self._pool) as conn:
            await holds.lift(conn, scope)
            resumed = await instances.transition_many(
                conn,
                f"{where} AND status = 'paused' AND pause_reason = %s",
                (*params, scope.kind),
                {"status": "running", "pause_reason": None},
                "instance_resumed",
                {"by": scope.kind},
            )
        if resumed:
            self._on_resumed()
        return len(resumed)

    async def cancel_scope(self, who: Principal, scope: Scope) -> int:
        where, params = _matching(scope)
        async with transaction(self._pool) as conn:
            canceled = await instances.transition_many(
                conn,
                f"{where} AND status IN ('running', 'paused')",
                params,
                {
                    "status": "canceled",
                    "pause_reason": None,
                    "waiting": False,
                    "claimed_by": None,
                    "claim_expires": None,
                },
                "instance_canceled",
                {"by": scope.kind},
            )
        OUTCOMES.add(len(canceled), {"status": "canceled"})
        return len(canceled)

    async def holds(self, who: Principal) -> list[HoldRow]:
        async with transaction(self._pool) as conn:
            found = await holds.in_organization(conn, organization_of(who))
        if who.project_id:
            return [h for h in found if h.project_id in ("", who.project_id)]
        return found

    async def _locked(self, conn: Conn, who: Principal, instance_id: str) -> InstanceRow:
        try:
            ident = uuid.UUID(instance_id)
        except ValueError:
            raise invalid_field("id", "must be a UUID") from None
        found = await instances.lock(conn, organization_of(who), ident)
        if found is None or (who.project_id and found.project_id != who.project_id):
            raise not_found("instance", instance_id)
        if found.status in TERMINAL:
            raise failed_precondition(
                INSTANCE_TERMINAL, f"instance {instance_id} is {found.status}; it cannot change"
            )
        return found
