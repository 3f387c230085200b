"""Instances and their event logs.

Log positions are dense (1..n) because every append happens while the
instance row is locked (created in the same transaction, or claimed FOR
UPDATE), and (instance, position) is the primary key, so a racing writer
fails instead of writing a gap or a duplicate.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from libs.db import jsonb
from services.orchestrator.domain.reentry import History
from services.orchestrator.storage import holds

Conn = AsyncConnection[Any]

TERMINAL = ("completed", "failed", "canceled")


@dataclass(frozen=True)
class InstanceRow:
    id: uuid.UUID
    organization_id: str
    project_id: str
    environment: str
    workflow_id: uuid.UUID
    workflow_version: int
    definition: dict[str, Any]
    event: uuid.UUID
    event_id: str
    subject: str | None
    status: str
    next_step: int
    attempt: int
    waiting: bool
    wake_time: datetime
    claimed_by: str | None
    claim_expires: datetime | None
    is_test: bool
    skip_side_effects: bool
    run_key: str
    create_time: datetime
    update_time: datetime
    pause_reason: str | None = None
    # Not a column: why the instance may not start its next step (lock_claimed sets it).
    hold: str | None = None


@dataclass(frozen=True)
class LogEntry:
    position: int
    kind: str
    step: int | None
    attempt: int | None
    detail: dict[str, Any]
    time: datetime


def reentry_lock_key(workflow_id: uuid.UUID, subject: str) -> int:
    digest = hashlib.sha256(f"reentry:{workflow_id}:{subject}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


async def lock_subjects(conn: Conn, keys: list[int]) -> None:
    """Transaction-scoped advisory locks, taken in one order to rule out deadlocks."""
    for key in sorted(set(keys)):
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (key,))


async def history(conn: Conn, workflow_id: uuid.UUID, subject: str) -> History:
    cur = await conn.execute(
        "SELECT bool_or(status <> 'failed') AS unfailed, max(create_time) AS last_start"
        " FROM orchestrator.instances WHERE workflow_id = %s AND subject = %s AND run_key = ''",
        (workflow_id, subject),
    )
    row = await cur.fetchone()
    assert row is not None
    return History(bool(row["unfailed"]), row["last_start"])


async def create(
    conn: Conn,
    *,
    organization_id: str,
    project_id: str,
    environment: str,
    workflow_id: uuid.UUID,
    version: int,
    definition: dict[str, Any],
    event: uuid.UUID,
    event_id: str,
    subject: str | None,
    skip_side_effects: bool,
    is_test: bool = False,
    run_key: str = "",
    next_step: int = 0,
) -> uuid.UUID | None:
    """Insert a running instance and log `instance_created`; None if it already exists."""
    created = await create_many(
        conn,
        [
            NewInstance(
                organization_id,
                project_id,
                environment,
                workflow_id,
                version,
                definition,
                event,
                event_id,
                subject,
                skip_side_effects,
                is_test,
                run_key,
                next_step,
            )
        ],
    )
    return created[0].id if created else None


@dataclass(frozen=True)
class NewInstance:
    organization_id: str
    project_id: str
    environment: str
    workflow_id: uuid.UUID
    version: int
    definition: dict[str, Any]
    event: uuid.UUID
    event_id: str
    subject: str | None
    skip_side_effects: bool
    is_test: bool = False
    run_key: str = ""
    next_step: int = 0
    id: uuid.UUID = field(default_factory=uuid.uuid4)


@dataclass(frozen=True)
class Claim:
    """Instances to create claimed by ``worker``, their first steps started: ``steps``
    holds each one's first step timeout, which the lease must outlast."""

    worker: str
    lease: timedelta
    steps: dict[uuid.UUID, timedelta]


# Every column but the definition: it never changes, and the caller has it already, so the
# rows a worker reads and writes back on every step need not carry and decode it again.
_COLUMNS = (
    "id, organization_id, project_id, environment, workflow_id, workflow_version, event,"
    " event_id, subject, status, next_step, attempt, waiting, wake_time, claimed_by,"
    " claim_expires, is_test, skip_side_effects, run_key, create_time, update_time,"
    " pause_reason"
)


async def create_many(
    conn: Conn, specs: list[NewInstance], claim: Claim | None = None
) -> list[InstanceRow]:
    """Insert running instances, skipping those that exist, each logged `instance_created`;
    returns the new ones in the order given. Those in ``claim`` are created claimed with
    `step_started` logged, unless a hold or a disabled workflow stops them: those are left
    to the workers' claim, which holds them at the boundary. One statement."""
    if not specs:
        return []
    claimed = claim.steps if claim is not None else {}
    cur = await conn.execute(
        "WITH new AS (SELECT * FROM jsonb_to_recordset(%s) AS i(id uuid, organization_id text,"
        "   project_id text, environment text, workflow_id uuid, workflow_version int,"
        "   definition jsonb, event uuid, event_id text, subject text, next_step int,"
        "   is_test bool, skip_side_effects bool, run_key text, step_timeout_ms bigint)),"
        " checked AS (SELECT c.*, CASE WHEN c.step_timeout_ms IS NOT NULL"
        "   AND c.hold_scope IS NULL AND c.workflow_status IS DISTINCT FROM 'paused'"
        "   THEN %s::text END AS claimed_by"
        f"   FROM (SELECT i.*, {holds.BOUNDARY_COLUMNS} FROM new i) c),"
        " created AS (INSERT INTO orchestrator.instances (id, organization_id, project_id,"
        "   environment, workflow_id, workflow_version, definition, event, event_id, subject,"
        "   status, next_step, is_test, skip_side_effects, run_key, attempt, claimed_by,"
        "   claim_expires)"
        "   SELECT id, organization_id, project_id, environment, workflow_id, workflow_version,"
        "   definition, event, event_id, subject, 'running', next_step, is_test,"
        "   skip_side_effects, run_key, CASE WHEN claimed_by IS NULL THEN 0 ELSE 1 END,"
        "   claimed_by, CASE WHEN claimed_by IS NOT NULL"
        "   THEN now() + %s::interval + make_interval(secs => step_timeout_ms / 1000.0) END"
        "   FROM checked ON CONFLICT (event, workflow_id, run_key) DO NOTHING"
        f"   RETURNING {_COLUMNS}),"
        # New rows of this statement: their logs start at position 1.
        " logged AS (INSERT INTO orchestrator.instance_log"
        "   (instance_id, position, kind, step, attempt, detail)"
        "   SELECT id, 1, 'instance_created', NULL, NULL,"
        "   jsonb_build_object('workflow_version', workflow_version) FROM created"
        "   UNION ALL SELECT id, 2, 'step_started', next_step, 1, '{}'::jsonb"
        "   FROM created WHERE claimed_by IS NOT NULL)"
        " SELECT * FROM created",
        (
            jsonb.rows([_new(spec, claimed.get(spec.id)) for spec in specs]),
            claim.worker if claim is not None else None,
            claim.lease if claim is not None else None,
        ),
    )
    rows = {row["id"]: row for row in await cur.fetchall()}
    return [InstanceRow(**rows[s.id], definition=s.definition) for s in specs if s.id in rows]


def _new(spec: NewInstance, step_timeout: timedelta | None) -> dict[str, Any]:
    return {
        "id": spec.id,
        "organization_id": spec.organization_id,
        "project_id": spec.project_id,
        "environment": spec.environment,
        "workflow_id": spec.workflow_id,
        "workflow_version": spec.version,
        "definition": spec.definition,
        "event": spec.event,
        "event_id": spec.event_id,
        "subject": spec.subject,
        "next_step": spec.next_step,
        "is_test": spec.is_test,
        "skip_side_effects": spec.skip_side_effects,
        "run_key": spec.run_key,
        # Claimed with its first step started: the step's timeout, which the lease outlasts.
        "step_timeout_ms": (
            step_timeout // timedelta(milliseconds=1) if step_timeout is not None else None
        ),
    }


async def append(
    conn: Conn,
    instance_id: uuid.UUID,
    kind: str,
    *,
    step: int | None = None,
    attempt: int | None = None,
    detail: dict[str, Any] | None = None,
) -> int:
    cur = await conn.execute(
        "INSERT INTO orchestrator.instance_log (instance_id, position, kind, step, attempt, detail)"
        " SELECT %s, coalesce(max(position), 0) + 1, %s, %s, %s, %s"
        " FROM orchestrator.instance_log WHERE instance_id = %s RETURNING position",
        (instance_id, kind, step, attempt, Jsonb(detail or {}), instance_id),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["position"])


async def claim_due(conn: Conn, worker: str, limit: int, lease: timedelta) -> list[InstanceRow]:
    """Claim runnable instances; a dead worker's expired claim is taken over."""
    cur = await conn.execute(
        "UPDATE orchestrator.instances i SET claimed_by = %s, claim_expires = now() + %s"
        " WHERE id IN (SELECT id FROM orchestrator.instances"
        "   WHERE status = 'running' AND wake_time <= now()"
        "   AND (claim_expires IS NULL OR claim_expires < now())"
        "   ORDER BY wake_time LIMIT %s FOR UPDATE SKIP LOCKED)"
        f" RETURNING i.*, {holds.BOUNDARY_COLUMNS}",
        (worker, lease, limit),
    )
    return [_with_hold(r) for r in await cur.fetchall()]


async def start_steps(
    conn: Conn, starts: list[tuple[uuid.UUID, int, timedelta]], lease: timedelta
) -> list[InstanceRow]:
    """Log `step_started` for each (instance, step, step timeout) this transaction holds
    claimed, count the attempt and extend the lease past the step: one round trip."""
    if not starts:
        return []
    cur = await conn.execute(
        "WITH started AS (SELECT * FROM unnest(%s::uuid[], %s::int[], %s::interval[])"
        "   AS s(id, step, timeout)),"
        " logged AS (INSERT INTO orchestrator.instance_log"
        "   (instance_id, position, kind, step, attempt, detail)"
        "   SELECT s.id, (SELECT coalesce(max(l.position), 0) + 1"
        "     FROM orchestrator.instance_log l WHERE l.instance_id = s.id),"
        "   'step_started', s.step, i.attempt + 1, '{}'::jsonb"
        "   FROM started s JOIN orchestrator.instances i ON i.id = s.id)"
        " UPDATE orchestrator.instances i SET attempt = i.attempt + 1,"
        "   claim_expires = now() + %s + s.timeout, update_time = now()"
        " FROM started s WHERE i.id = s.id RETURNING i.*",
        ([s[0] for s in starts], [s[1] for s in starts], [s[2] for s in starts], lease),
    )
    return [InstanceRow(**r) for r in await cur.fetchall()]


def _with_hold(row: dict[str, Any], **known: Any) -> InstanceRow:
    """An instance row read with BOUNDARY_COLUMNS; ``known`` supplies columns not read."""
    hold = holds.hold_reason(row.pop("hold_scope"), row.pop("workflow_status"))
    return InstanceRow(**row, **known, hold=hold)


async def claim_holders(conn: Conn, pattern: str) -> list[str]:
    cur = await conn.execute(
        "SELECT DISTINCT claimed_by FROM orchestrator.instances"
        " WHERE status = 'running' AND claimed_by LIKE %s",
        (pattern,),
    )
    return [row["claimed_by"] for row in await cur.fetchall()]


async def release_claims(conn: Conn, holders: list[str]) -> int:
    cur = await conn.execute(
        "UPDATE orchestrator.instances SET claimed_by = NULL, claim_expires = NULL"
        " WHERE status = 'running' AND claimed_by = ANY(%s)",
        (holders,),
    )
    return cur.rowcount


async def lock_claimed(conn: Conn, instance: InstanceRow, worker: str) -> InstanceRow | None:
    """The instance, locked, if this worker still holds its claim (else someone took over).

    A paused instance is still returned: the step it was running finishes
    and its outcome is kept; the worker then holds it at the boundary.
    """
    cur = await conn.execute(
        f"SELECT {_COLUMNS}, {holds.BOUNDARY_COLUMNS} FROM orchestrator.instances i"
        " WHERE i.id = %s AND i.claimed_by = %s AND i.status IN ('running', 'paused')"
        " FOR UPDATE OF i",
        (instance.id, worker),
    )
    row = await cur.fetchone()
    return _with_hold(row, definition=instance.definition) if row else None


async def update(conn: Conn, instance_id: uuid.UUID, **changes: Any) -> InstanceRow:
    sets = "".join(f"{column} = %s, " for column in changes)
    cur = await conn.execute(
        f"UPDATE orchestrator.instances SET {sets}update_time = now() WHERE id = %s RETURNING *",
        (*changes.values(), instance_id),
    )
    return InstanceRow(**await cur.fetchone())  # type: ignore[arg-type]


async def get(conn: Conn, organization_id: str, instance_id: uuid.UUID) -> InstanceRow | None:
    cur = await conn.execute(
        "SELECT * FROM orchestrator.instances WHERE organization_id = %s AND id = %s",
        (organization_id, instance_id),
    )
    row = await cur.fetchone()
    return InstanceRow(**row) if row else None


async def for_event(conn: Conn, event: uuid.UUID) -> list[InstanceRow]:
    cur = await conn.execute(
        "SELECT * FROM orchestrator.instances WHERE event = %s ORDER BY create_time, id", (event,)
    )
    return [InstanceRow(**r) for r in await cur.fetchall()]


async def list_page(
    conn: Conn,
    organization_id: str,
    project_id: str | None,
    workflow_id: uuid.UUID | None,
    status: str,
    before: tuple[str, str] | None,
    limit: int,
) -> list[InstanceRow]:
    clauses, params = ["organization_id = %s"], [organization_id]
    for column, value in (
        ("project_id", project_id),
        ("workflow_id", workflow_id),
        ("status", status),
    ):
        if value:
            clauses.append(f"{column} = %s")
            params.append(value)  # type: ignore[arg-type]
    if before is not None:
        clauses.append("(create_time, id) < (%s::timestamptz, %s::uuid)")
        params.extend(before)
    cur = await conn.execute(
        f"SELECT * FROM orchestrator.instances WHERE {' AND '.join(clauses)}"
        " ORDER BY create_time DESC, id DESC LIMIT %s",
        (*params, limit),
    )
    return [InstanceRow(**r) for r in await cur.fetchall()]


async def log(conn: Conn, instance_id: uuid.UUID) -> list[LogEntry]:
    cur = await conn.execute(
        "SELECT position, kind, step, attempt, detail, time FROM orchestrator.instance_log"
        " WHERE instance_id = %s ORDER BY position",
        (instance_id,),
    )
    return [LogEntry(**r) for r in await cur.fetchall()]


async def lock(conn: Conn, organization_id: str, instance_id: uuid.UUID) -> InstanceRow | None:
    cur = await conn.execute(
        "SELECT * FROM orchestrator.instances WHERE organization_id = %s AND id = %s FOR UPDATE",
        (organization_id, instance_id),
    )
    row = await cur.fetchone()
    return InstanceRow(**row) if row else None


async def transition_many(
    conn: Conn,
    where: str,
    params: tuple[Any, ...],
    changes: dict[str, Any],
    kind: str,
    detail: dict[str, Any],
) -> list[uuid.UUID]:
    """Change every instance matching ``where`` and log ``kind`` for each.

    Two statements on purpose: the UPDATE locks the rows first, so the log
    insert's fresh snapshot sees every position a worker wrote before it.
    """
    sets = "".join(f"{column} = %s, " for column in changes)
    cur = await conn.execute(
        f"UPDATE orchestrator.instances SET {sets}update_time = now() WHERE {where} RETURNING id",
        (*changes.values(), *params),
    )
    ids = [row["id"] for row in await cur.fetchall()]
    if ids:
        await conn.execute(
            "INSERT INTO orchestrator.instance_log (instance_id, position, kind, detail)"
            " SELECT changed.id, coalesce(max(log.position), 0) + 1, %s, %s"
            " FROM unnest(%s::uuid[]) AS changed(id)"
            " LEFT JOIN orchestrator.instance_log log ON log.instance_id = changed.id"
            " GROUP BY changed.id",
            (kind, Jsonb(detail), ids),
        )
    return ids


LogLine = tuple[str, int | None, int | None, dict[str, Any]]  # kind, step, attempt, detail


async def log_and_update(
    conn: Conn, instance: InstanceRow, lines: list[LogLine], **changes: Any
) -> InstanceRow:
    """Append ``lines`` to the log and apply ``changes``, in one round trip.

    The caller holds the instance's row lock, so no other writer appends
    between the statement's read of the last position and its insert.
    """
    sets = "".join(f"{column} = %s, " for column in changes)
    cur = await conn.execute(
        "WITH base AS (SELECT coalesce(max(position), 0) AS last"
        "   FROM orchestrator.instance_log WHERE instance_id = %s),"
        " logged AS (INSERT INTO orchestrator.instance_log"
        "   (instance_id, position, kind, step, attempt, detail)"
        "   SELECT %s, base.last + line.n, line.kind, line.step, line.attempt, line.detail"
        "   FROM base, ROWS FROM (jsonb_to_recordset(%s)"
        "   AS (kind text, step int, attempt int, detail jsonb))"
        "   WITH ORDINALITY AS line(kind, step, attempt, detail, n))"
        f" UPDATE orchestrator.instances SET {sets}update_time = now() WHERE id = %s"
        f" RETURNING {_COLUMNS}",
        (
            instance.id,
            instance.id,
            jsonb.rows(
                [
                    {"kind": kind, "step": step, "attempt": attempt, "detail": detail}
                    for kind, step, attempt, detail in lines
                ]
            ),
            *changes.values(),
            instance.id,
        ),
    )
    row = await cur.fetchone()
    assert row is not None
    return InstanceRow(**row, definition=instance.definition)
