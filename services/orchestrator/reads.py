"""Reading events, reactions, instances and their logs, tenant-scoped."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

from libs.auth import Principal
from libs.auth.scope import organization_of, project_scope
from libs.db import transaction
from libs.errors import invalid_field, not_found
from libs.pagination import decode_token, encode_token, page_size
from services.orchestrator.environments import environment_of, require_environment
from services.orchestrator.storage import events as event_store
from services.orchestrator.storage import instances
from services.orchestrator.storage.events import EventRow
from services.orchestrator.storage.instances import InstanceRow, LogEntry


@dataclass(frozen=True)
class StepView:
    index: int
    name: str
    type: str
    status: str
    attempts: int
    error: str
    output: dict[str, Any] | None


@dataclass(frozen=True)
class ReactionView:
    instance: InstanceRow
    steps: list[StepView]


class Reads:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def event(self, who: Principal, event_id: str, project: str, env: str) -> EventRow:
        org, project_id = organization_of(who), project_scope(who, project)
        assert project_id is not None
        environment = environment_of(env)
        async with transaction(self._pool) as conn:
            await require_environment(conn, org, project_id, environment)
            found = await event_store.find(conn, org, project_id, environment, event_id)
        if found is None:
            raise not_found("event", event_id)
        return found

    async def reactions(
        self, who: Principal, event_id: str, project: str, env: str
    ) -> list[ReactionView]:
        event = await self.event(who, event_id, project, env)
        async with transaction(self._pool) as conn:
            runs = await instances.for_event(conn, event.id)
            return [ReactionView(i, steps_of(i, await instances.log(conn, i.id))) for i in runs]

    async def instance(self, who: Principal, instance_id: str) -> InstanceRow:
        async with transaction(self._pool) as conn:
            return await self._instance(conn, who, instance_id)

    async def log(self, who: Principal, instance_id: str) -> list[LogEntry]:
        async with transaction(self._pool) as conn:
            instance = await self._instance(conn, who, instance_id)
            return await instances.log(conn, instance.id)

    async def instances(
        self, who: Principal, project: str, workflow: str, status: str, size: int, token: str
    ) -> tuple[list[InstanceRow], str]:
        org = organization_of(who)
        project_id = project_scope(who, project, required=False)
        limit = page_size(size)
        cursor = decode_token(token, ("t", "id"))
        before = (cursor["t"], cursor["id"]) if cursor else None
        async with transaction(self._pool) as conn:
            rows = await instances.list_page(
                conn, org, project_id, _uuid(workflow, "workflow_id"), status, before, limit + 1
            )
        more = len(rows) > limit
        last = rows[limit - 1] if more else None
        token_out = (
            encode_token({"t": last.create_time.isoformat(), "id": str(last.id)}) if last else ""
        )
        return rows[:limit], token_out

    async def _instance(self, conn: Any, who: Principal, instance_id: str) -> InstanceRow:
        found = await instances.get(conn, organization_of(who), _required_uuid(instance_id, "id"))
        if found is None or (who.project_id and found.project_id != who.project_id):
            raise not_found("instance", instance_id)
        return found


def steps_of(instance: InstanceRow, entries: list[LogEntry]) -> list[StepView]:
    """Each step's latest state, read from the instance's log."""
    views = []
    for index, step in enumerate(instance.definition["steps"]):
        mine = [e for e in entries if e.step == index]
        status, error, output, attempts = "pending", "", None, 0
        for entry in mine:
            attempts = max(attempts, entry.attempt or 0)
            if entry.kind == "step_started":
                status = "running"
            elif entry.kind == "wait_created":
                status = "waiting"
            elif entry.kind == "step_retrying":
                status, error = "retrying", str(entry.detail.get("error", ""))
            elif entry.kind == "step_completed":
                status, error, output = "completed", "", entry.detail.get("output")
            elif entry.kind == "step_skipped":
                status, error = "skipped", str(entry.detail.get("reason", ""))
            elif entry.kind == "step_failed":
                status, error = "failed", str(entry.detail.get("error", ""))
        views.append(
            StepView(index, step.get("name", ""), step["type"], status, attempts, error, output)
        )
    return views


def output_json(output: dict[str, Any] | None) -> str:
    return json.dumps(output, ensure_ascii=False) if output is not None else ""


def _uuid(value: str, field: str) -> uuid.UUID | None:
    return _required_uuid(value, field) if value else None


def _required_uuid(value: str, field: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise invalid_field(field, "must be a UUID") from None
