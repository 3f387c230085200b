"""The dead-letter queue's operations: list, inspect, redrive, discard."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime

import grpc
from psycopg_pool import AsyncConnectionPool

from libs.auth import Principal
from libs.auth.scope import organization_of, project_scope
from libs.db import transaction
from libs.errors import EventflowError, invalid_field, not_found
from libs.pagination import decode_token, encode_token, page_size
from services.orchestrator.storage import dead_letters, instances
from services.orchestrator.storage.dead_letters import DeadLetterRow
from services.orchestrator.storage.events import Conn


class DeadLetterQueue:
    def __init__(self, pool: AsyncConnectionPool, on_started: Callable[[], None]) -> None:
        self._pool = pool
        self._on_started = on_started

    async def list(
        self,
        who: Principal,
        project: str,
        workflow: str,
        reason: str,
        status: str,
        size: int,
        token: str,
        window: tuple[datetime | None, datetime | None] = (None, None),
    ) -> tuple[list[DeadLetterRow], str]:
        if status not in ("", "open", "redriven", "discarded", "all"):
            raise invalid_field("status", "must be open, redriven, discarded or all")
        limit = page_size(size)
        cursor = decode_token(token, ("t", "id"))
        before = (cursor["t"], cursor["id"]) if cursor else None
        async with transaction(self._pool) as conn:
            rows = await dead_letters.list_page(
                conn,
                organization_of(who),
                project_scope(who, project, required=False),
                _uuid(workflow, "workflow_id") if workflow else None,
                reason,
                status,
                window,
                before,
                limit + 1,
            )
        if len(rows) <= limit:
            return rows, ""
        last = rows[limit - 1]
        return rows[:limit], encode_token({"t": last.create_time.isoformat(), "id": str(last.id)})

    async def get(self, who: Principal, letter_id: str) -> DeadLetterRow:
        async with transaction(self._pool) as conn:
            return await self._load(conn, who, letter_id)

    async def redrive(
        self, who: Principal, letter_id: str, from_start: bool
    ) -> tuple[DeadLetterRow, uuid.UUID]:
        """A new instance of the same version for the same event; once per entry."""
        async with transaction(self._pool) as conn:
            letter = await self._load(conn, who, letter_id, lock=True)
            if letter.status == "redriven" and letter.redrive_instance_id is not None:
                return letter, letter.redrive_instance_id
            if letter.status == "discarded":
                raise EventflowError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "DEAD_LETTER_DISCARDED",
                    f"dead letter {letter_id} was discarded",
                )
            failed = await instances.get(conn, letter.organization_id, letter.instance_id)
            assert failed is not None
            created = await instances.create(
                conn,
                organization_id=failed.organization_id,
                project_id=failed.project_id,
                environment=failed.environment,
                workflow_id=failed.workflow_id,
                version=failed.workflow_version,
                definition=failed.definition,
                event=failed.event,
                event_id=failed.event_id,
                subject=failed.subject,
                skip_side_effects=failed.skip_side_effects,
                is_test=failed.is_test,
                run_key=f"redrive:{letter.id}",
                next_step=0 if from_start else letter.step,
            )
            assert created is not None
            letter = await dead_letters.set_status(conn, letter.id, "redriven", created)
        self._on_started()
        return letter, created

    async def discard(self, who: Principal, letter_id: str) -> DeadLetterRow:
        async with transaction(self._pool) as conn:
            letter = await self._load(conn, who, letter_id, lock=True)
            if letter.status == "redriven":
                raise EventflowError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "DEAD_LETTER_REDRIVEN",
                    f"dead letter {letter_id} was already redriven",
                )
            return await dead_letters.set_status(conn, letter.id, "discarded")

    async def _load(
        self, conn: Conn, who: Principal, letter_id: str, *, lock: bool = False
    ) -> DeadLetterRow:
        found = await dead_letters.get(
            conn, organization_of(who), _uuid(letter_id, "id"), lock=lock
        )
        if found is None or (who.project_id and found.project_id != who.project_id):
            raise not_found("dead letter", letter_id)
        return found


def _uuid(value: str, field: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise invalid_field(field, "must be a UUID") from None
