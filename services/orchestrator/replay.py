"""Replay: re-run the matching workflows on stored events (SPEC §8).

A replay starts new instances (run key `replay:<id>`) of every active
workflow whose trigger is the event's type, with side effects suppressed
unless an admin asks otherwise. Custom actions run and projections are
rewritten (keyed rows upsert; appended rows are keyed by event, workflow
and step, so nothing is added twice); webhooks are `step_skipped`; derived
events carry the flag on. Re-entry does not apply to replays.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from psycopg_pool import AsyncConnectionPool

from libs.auth import Principal, Role
from libs.auth.scope import organization_of, project_scope
from libs.db import transaction
from libs.errors import invalid_field, not_found, permission_denied
from services.orchestrator.domain import reentry
from services.orchestrator.environments import environment_of, require_environment
from services.orchestrator.storage import events as event_store
from services.orchestrator.storage import instances, read_models
from services.orchestrator.storage.events import Conn, EventRow, ReplaySelection

BATCH = 100


@dataclass(frozen=True)
class ReplayProgress:
    replay_id: str
    matched: int
    replayed: int
    instances_started: int
    done: bool


def _check_side_effects(who: Principal, with_side_effects: bool) -> None:
    if with_side_effects and who.role < Role.ADMIN:
        raise permission_denied(
            "ROLE_TOO_LOW", "replaying with side effects (webhooks fire again) needs the admin role"
        )


class Replays:
    def __init__(self, pool: AsyncConnectionPool, on_started: Callable[[], None]) -> None:
        self._pool = pool
        self._on_started = on_started

    async def replay_event(
        self, who: Principal, event_id: str, project: str, env: str, with_side_effects: bool
    ) -> tuple[str, list[uuid.UUID]]:
        _check_side_effects(who, with_side_effects)
        if not event_id:
            raise invalid_field("event_id", "is required")
        org, project_id = organization_of(who), project_scope(who, project)
        assert project_id is not None
        environment = environment_of(env)
        replay_id = str(uuid.uuid4())
        async with transaction(self._pool) as conn:
            await require_environment(conn, org, project_id, environment)
            event = await event_store.find(conn, org, project_id, environment, event_id)
            if event is None:
                raise not_found("event", event_id)
            started = await _rerun(conn, event, replay_id, with_side_effects)
        if started:
            self._on_started()
        return replay_id, started

    async def replay_events(
        self,
        who: Principal,
        project: str,
        env: str,
        event_type: str,
        since: datetime | None,
        until: datetime | None,
        with_side_effects: bool,
    ) -> AsyncIterator[ReplayProgress]:
        """Replays in batches, one transaction each, yielding progress after each."""
        _check_side_effects(who, with_side_effects)
        if not (event_type or since or until):
            raise invalid_field("type", "give a type, a start_time or an end_time to replay")
        if since and until and since >= until:
            raise invalid_field("end_time", "must be after start_time")
        org, project_id = organization_of(who), project_scope(who, project)
        assert project_id is not None
        environment = environment_of(env)
        # Capped at now: events arriving during the replay are not part of it.
        selection = ReplaySelection(
            org, project_id, environment, event_type or None, since, until or datetime.now(UTC)
        )
        replay_id = str(uuid.uuid4())
        async with transaction(self._pool) as conn:
            await require_environment(conn, org, project_id, environment)
            matched = await event_store.count_selected(conn, selection)
        replayed = started = 0
        after: tuple[datetime, uuid.UUID] | None = None
        while True:
            async with transaction(self._pool) as conn:
                page = await event_store.page_selected(conn, selection, after, BATCH)
                for event in page:
                    started += len(await _rerun(conn, event, replay_id, with_side_effects))
            if not page:
                break
            replayed += len(page)
            last = page[-1]
            assert last.receive_time is not None
            after = (last.receive_time, last.id)
            self._on_started()
            yield ReplayProgress(replay_id, matched, replayed, started, False)
        yield ReplayProgress(replay_id, matched, replayed, started, True)


async def _rerun(
    conn: Conn, event: EventRow, replay_id: str, with_side_effects: bool
) -> list[uuid.UUID]:
    started = []
    for workflow in await read_models.matching(
        conn, event.organization_id, event.project_id, event.environment, event.type
    ):
        created = await instances.create(
            conn,
            organization_id=event.organization_id,
            project_id=event.project_id,
            environment=event.environment,
            workflow_id=workflow.workflow_id,
            version=workflow.version,
            definition=workflow.definition,
            event=event.id,
            event_id=event.event_id,
            subject=reentry.subject_of(event.data),
            skip_side_effects=not with_side_effects,
            run_key=f"replay:{replay_id}",
        )
        if created is not None:
            started.append(created)
    return started
