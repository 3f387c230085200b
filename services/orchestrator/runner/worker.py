"""Workers: claim due instances and drive them through their steps.

A claim is a lease (`claimed_by`, `claim_expires`) taken with FOR UPDATE
SKIP LOCKED, so processes share the work and a dead worker's instances are
taken over when its lease runs out. A step runs outside any transaction;
its outcome is written only if the claim is still ours (`lock_claimed`),
so a worker that lost its lease cannot overwrite a newer one's progress.
Delays and retries are durable: a future `wake_time`, no worker held.

Each attempt of a step is a span under its event's ingest span (stored with
the event), so it joins the producer's trace whichever worker runs it and
however late; what the outcome writes (derived events, dead letters) carries
that trace on through the outbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import uuid
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, Status, StatusCode
from psycopg_pool import AsyncConnectionPool

from libs.bus import topics as bus_topics
from libs.db import transaction
from libs.outbox import enqueue
from libs.processes import pid_running
from libs.telemetry import stored_context
from services.orchestrator.domain.outcomes import Outcome
from services.orchestrator.domain.retry import may_retry, retry_delay
from services.orchestrator.events.cloudevents import OutgoingEvent, encode_structured
from services.orchestrator.runner.steps import StepContext, StepRunner
from services.orchestrator.storage import SCHEMA, dead_letters, instances, projections
from services.orchestrator.storage import events as event_store
from services.orchestrator.storage.events import Conn, EventRow
from services.orchestrator.storage.instances import Claim, InstanceRow, LogLine, NewInstance

log = logging.getLogger(__name__)
meter = metrics.get_meter("eventflow.orchestrator")
tracer = trace.get_tracer("eventflow.orchestrator")
OUTCOMES = meter.create_counter(
    "eventflow.instances.finished", unit="{instance}", description="instances ended, by status"
)
STEP_LATENCY = meter.create_histogram(
    "eventflow.step.duration",
    unit="ms",
    description="one attempt of a custom_action or webhook step, by type and outcome",
)

LEASE = timedelta(seconds=60)
MAX_DERIVED_DEPTH = 8
# Events of instances in flight, oldest dropped first.
EVENT_CACHE_SIZE = 4096
# Derived event ids are a function of (instance, step): a relay retry or a
# re-run step yields the same id, which ingest deduplicates.
DERIVED_IDS = uuid.UUID("6f1b1c3e-5c7a-4a55-9d2e-0e7c1f3b9a10")


class Worker:
    def __init__(
        self,
        pool: AsyncConnectionPool,
        steps: StepRunner,
        *,
        concurrency: int = 64,
        poll_interval_s: float = 0.2,
        lease: timedelta = LEASE,
    ) -> None:
        self._pool = pool
        self._steps = steps
        self._concurrency = concurrency
        self._poll = poll_interval_s
        self._lease = lease
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.Task[None] | None = None
        self._events: dict[uuid.UUID, EventRow] = {}
        # Claimed instances whose current step is already logged as started.
        self._started: set[uuid.UUID] = set()
        # The last claim took as many as it had room for: more may be due.
        self._backlog = False

    def notify(self) -> None:
        """Something became due now (new instances): look without waiting for the poll."""
        self._wake.set()

    async def start(self) -> None:
        await self.release_orphans()
        self._loop = asyncio.create_task(self._run(), name=f"worker {self.name}")

    async def release_orphans(self) -> int:
        """Free claims held by dead workers of this host at once, not at lease expiry.

        A worker's name is host:pid:token, so after a crash and restart on the
        same machine the dead process's claims are recognisable; claims of
        other hosts are left to expire.
        """
        host = socket.gethostname()
        async with transaction(self._pool) as conn:
            holders = await instances.claim_holders(conn, f"{host}:%")
            dead = [h for h in holders if not _alive(h)]
            return await instances.release_claims(conn, dead) if dead else 0

    async def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            try:
                claimed = await self._claim()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("claiming instances failed; retrying")
                claimed = []
            for instance in claimed:
                await self._slots.acquire()
                task = asyncio.create_task(self._drive(instance))
                self._tasks.add(task)
                task.add_done_callback(self._done)
            if not claimed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=self._poll)
                self._wake.clear()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()
        # When the last claim filled every free slot, more may be due: a freed slot
        # takes it now, as waiting for the poll would cap throughput at concurrency
        # per poll interval. Otherwise a claim now would only find nothing.
        if self._backlog:
            self._wake.set()

    async def _claim(self) -> list[InstanceRow]:
        free = self._concurrency - len(self._tasks)
        if free <= 0:
            self._backlog = True
            return []
        async with transaction(self._pool) as conn:
            claimed = await instances.claim_due(conn, self.name, free, self._lease)
            # What can start its step now starts in this transaction, not one of its own.
            started = await instances.start_steps(
                conn,
                [(i.id, i.next_step, _timeout(_step(i))) for i in claimed if _startable(i)],
                self._lease,
            )
            unread = list({i.event for i in started if i.event not in self._events})
            for event in await event_store.by_ids(conn, unread) if unread else []:
                self._remember(event)
        self._backlog = len(claimed) == free
        ready = {i.id: i for i in started}
        self._started.update(ready)
        return [ready.get(i.id, i) for i in claimed]

    def handoff(self) -> Handoff:
        """For an ingest transaction to create instances claimed for this worker (see
        Handoff), so that they run as soon as it commits: no claim, no poll between."""
        return Handoff(self)

    async def _reserve(self, specs: list[NewInstance]) -> Claim:
        """A free slot, taken now and never awaited, for each spec whose first step can
        start at once (not a delay) while there is one; the claim to create those under."""
        steps: dict[uuid.UUID, timedelta] = {}
        for spec in specs:
            step = spec.definition["steps"][spec.next_step]
            if step["type"] == "delay":
                continue
            if self._slots.locked():
                break
            await self._slots.acquire()
            steps[spec.id] = _timeout(step)
        return Claim(self.name, self._lease, steps)

    def _adopt(self, claimed: list[tuple[InstanceRow, EventRow]]) -> None:
        """Drive instances claimed (steps started) elsewhere, in slots already taken."""
        for instance, event in claimed:
            self._remember(event)
            self._started.add(instance.id)
            task = asyncio.create_task(self._drive(instance))
            self._tasks.add(task)
            task.add_done_callback(self._done)

    def _release(self, slots: int) -> None:
        for _ in range(slots):
            self._slots.release()

    async def _drive(self, instance: InstanceRow) -> None:
        """Run steps until the instance waits, retries later, or ends."""
        try:
            while instance is not None:
                instance = await self._advance(instance)  # type: ignore[assignment]
        except asyncio.CancelledError:
            raise
        except Exception:
            # The lease expires and another worker (or this one) tries again.
            log.exception("instance %s: unexpected error", instance.id if instance else "?")

    async def _advance(self, claimed: InstanceRow) -> InstanceRow | None:
        steps = claimed.definition["steps"]
        index = claimed.next_step
        step = steps[index]
        if step["type"] == "delay":
            return await self._delay(claimed, index, step)
        if claimed.id in self._started:  # its step_started is written already
            self._started.discard(claimed.id)
            instance, attempt = claimed, claimed.attempt
            cached = self._events.get(instance.event)
            if cached is None:
                async with transaction(self._pool) as conn:
                    cached = await self._event(conn, instance)
            event = cached
        else:
            async with transaction(self._pool) as conn:
                locked = await instances.lock_claimed(conn, claimed, self.name)
                if locked is None or not await self._may_start_step(conn, locked):
                    return None
                attempt = locked.attempt + 1
                # The lease must outlast the step, or another worker could run it too.
                instance = await instances.log_and_update(
                    conn,
                    locked,
                    [("step_started", index, attempt, {})],
                    attempt=attempt,
                    claim_expires=_now() + self._lease + _timeout(step),
                )
                event = await self._event(conn, instance)
        with _step_span(instance, event, index, step, attempt) as span:
            started = asyncio.get_running_loop().time()
            outcome = await self._steps.run(StepContext(instance, event, index, step, attempt))
            STEP_LATENCY.record(
                (asyncio.get_running_loop().time() - started) * 1000,
                {"type": step["type"], "outcome": outcome.kind},
            )
            _end_step(span, outcome)
            async with transaction(self._pool) as conn:
                locked = await instances.lock_claimed(conn, instance, self.name)
                if locked is None:
                    return None
                return await self._record(conn, locked, index, step, attempt, outcome)

    async def _delay(self, claimed: InstanceRow, index: int, step: dict) -> InstanceRow | None:
        async with transaction(self._pool) as conn:
            instance = await instances.lock_claimed(conn, claimed, self.name)
            if instance is None or not await self._may_start_step(conn, instance):
                return None
            if instance.waiting:  # the timer fired
                fired: LogLine = ("wait_completed", index, None, {})
                return await self._record(
                    conn, instance, index, step, 1, Outcome.completed(), [fired]
                )
            wake = _now() + timedelta(milliseconds=int(step["duration_ms"]))
            await instances.log_and_update(
                conn,
                instance,
                [
                    ("step_started", index, 1, {}),
                    ("wait_created", index, None, {"until": wake.isoformat()}),
                ],
                waiting=True,
                attempt=1,
                wake_time=wake,
                **_released(),
            )
            return None

    async def _event(self, conn: Conn, instance: InstanceRow) -> EventRow:
        """The instance's event; stored events never change, so each is read once."""
        event = self._events.get(instance.event)
        if event is None:
            event = await event_store.by_id(conn, instance.event)
            self._remember(event)
        return event

    def _remember(self, event: EventRow) -> None:
        if len(self._events) >= EVENT_CACHE_SIZE:
            self._events.pop(next(iter(self._events)))
        self._events[event.id] = event

    async def _may_start_step(self, conn: Conn, instance: InstanceRow) -> bool:
        """The step boundary: a paused or held instance stops here, releasing its claim."""
        if instance.status == "paused":
            await instances.update(conn, instance.id, **_released())
            return False
        if instance.hold is None:
            return True
        await instances.log_and_update(
            conn,
            instance,
            [("instance_paused", None, None, {"by": instance.hold})],
            status="paused",
            pause_reason=instance.hold,
            **_released(),
        )
        return False

    async def _record(
        self,
        conn: Conn,
        instance: InstanceRow,
        index: int,
        step: dict,
        attempt: int,
        outcome: Outcome,
        before: list[LogLine] | None = None,
    ) -> InstanceRow | None:
        """Write one attempt's outcome (after the ``before`` log lines); returns the
        instance if it should continue now."""
        lines = list(before or [])
        if outcome.kind == "completed" and step["type"] == "custom_action":
            refused = await self._apply_effects(conn, instance, index, outcome)
            if refused is not None:
                await self._fail(conn, instance, index, step, attempt, refused, lines)
                return None
        if outcome.kind in ("completed", "skipped"):
            kind = "step_completed" if outcome.kind == "completed" else "step_skipped"
            detail = (
                {"output": outcome.output}
                if outcome.kind == "completed"
                else {"reason": outcome.error}
            )
            return await self._next(conn, instance, index, [*lines, (kind, index, attempt, detail)])
        retry = step.get("retry", {})
        if outcome.kind == "retryable" and may_retry(retry, attempt):
            delay = retry_delay(retry, attempt)
            if outcome.retry_after_s:
                delay = max(delay, timedelta(seconds=outcome.retry_after_s))
            wake = _now() + delay
            detail = {
                "reason": outcome.reason,
                "error": outcome.error,
                "next_attempt": wake.isoformat(),
            }
            await instances.log_and_update(
                conn,
                instance,
                [*lines, ("step_retrying", index, attempt, detail)],
                wake_time=wake,
                **_released(),
            )
            return None
        await self._fail(conn, instance, index, step, attempt, outcome, lines)
        return None

    async def _apply_effects(
        self, conn: Conn, instance: InstanceRow, index: int, outcome: Outcome
    ) -> Outcome | None:
        """Projection and derived event, committed with the step result or not at all."""
        projection = outcome.output.get("projection")
        if projection is not None:
            written = await projections.write(conn, instance, index, projection)
            outcome.output["projection_id"] = str(written)
        derived = outcome.output.get("derived_event")
        if derived is None:
            return None
        cause = await self._event(conn, instance)
        if cause.depth + 1 > MAX_DERIVED_DEPTH:
            return Outcome.final(
                "DERIVED_EVENT_DEPTH",
                f"derived event chain deeper than {MAX_DERIVED_DEPTH} hops stopped",
            )
        event = derived_event(instance, index, cause, derived)
        key, value, headers = encode_structured(event)
        await enqueue(conn, SCHEMA, bus_topics.EVENTS, key, value, tuple(headers))
        outcome.output["derived_event_id"] = event.event_id
        return None

    async def _next(
        self, conn: Conn, instance: InstanceRow, index: int, lines: list[LogLine]
    ) -> InstanceRow | None:
        following = index + 1
        if following >= len(instance.definition["steps"]):
            await instances.log_and_update(
                conn,
                instance,
                [*lines, ("instance_completed", None, None, {})],
                status="completed",
                pause_reason=None,
                next_step=following,
                attempt=0,
                waiting=False,
                **_released(),
            )
            OUTCOMES.add(1, {"status": "completed"})
            return None
        upcoming = instance.definition["steps"][following]
        if instance.status != "running" or instance.hold is not None or upcoming["type"] == "delay":
            return await instances.log_and_update(
                conn,
                instance,
                lines,
                next_step=following,
                attempt=0,
                waiting=False,
                wake_time=_now(),
                claim_expires=_now() + self._lease,
            )
        # Free to go on: start the next step in this transaction too.
        updated = await instances.log_and_update(
            conn,
            instance,
            [*lines, ("step_started", following, 1, {})],
            next_step=following,
            attempt=1,
            waiting=False,
            wake_time=_now(),
            claim_expires=_now() + self._lease + _timeout(upcoming),
        )
        self._started.add(updated.id)
        return updated

    async def _fail(
        self,
        conn: Conn,
        instance: InstanceRow,
        index: int,
        step: dict,
        attempt: int,
        outcome: Outcome,
        before: list[LogLine],
    ) -> None:
        detail = {"reason": outcome.reason, "error": outcome.error}
        await instances.log_and_update(
            conn,
            instance,
            [
                *before,
                ("step_failed", index, attempt, detail),
                ("instance_failed", None, None, detail),
            ],
            status="failed",
            pause_reason=None,
            **_released(),
        )
        letter = await dead_letters.insert(
            conn,
            organization_id=instance.organization_id,
            project_id=instance.project_id,
            environment=instance.environment,
            event=instance.event,
            event_id=instance.event_id,
            instance_id=instance.id,
            workflow_id=instance.workflow_id,
            workflow_version=instance.workflow_version,
            step=index,
            step_name=step.get("name") or step["type"],
            attempts=attempt,
            reason=outcome.reason,
            error=outcome.error,
        )
        record = {
            "dead_letter_id": str(letter.id),
            "organization_id": letter.organization_id,
            "project_id": letter.project_id,
            "environment": letter.environment,
            "instance_id": str(letter.instance_id),
            "workflow_id": str(letter.workflow_id),
            "workflow_version": letter.workflow_version,
            "step": index,
            "attempts": attempt,
            "reason": outcome.reason,
            "error": outcome.error,
        }
        await enqueue(
            conn,
            SCHEMA,
            bus_topics.EVENTS_DLQ,
            str(letter.id).encode(),
            json.dumps(record).encode(),
            (("content-type", b"application/json"),),
        )
        OUTCOMES.add(1, {"status": "failed", "reason": outcome.reason})


class Handoff:
    """Instances a creating transaction claims for its process's worker, first steps
    started. Slots are taken before the insert (a hold or a disabled workflow may still
    leave an instance unclaimed); once the transaction commits, ``start`` runs what was
    claimed and gives the other slots back. ``abort`` gives them all back."""

    def __init__(self, worker: Worker | None) -> None:
        self._worker = worker
        self._slots = 0
        self._claimed: list[tuple[InstanceRow, EventRow]] = []
        self._unclaimed = 0

    @classmethod
    def none(cls) -> Handoff:
        return cls(None)

    async def claim(self, specs: list[NewInstance]) -> Claim | None:
        """The claim to create ``specs`` under, or None without a worker."""
        if self._worker is None:
            return None
        claim = await self._worker._reserve(specs)
        self._slots += len(claim.steps)
        return claim

    def took(self, created: list[InstanceRow], events: dict[uuid.UUID, EventRow]) -> None:
        """Note what ``create_many`` made of the specs ``claim`` was asked about."""
        for row in created:
            if row.claimed_by is None:
                self._unclaimed += 1
            else:
                self._claimed.append((row, events[row.event]))

    def start(self) -> None:
        if self._worker is None:
            return
        self._worker._adopt(self._claimed)
        self._worker._release(self._slots - len(self._claimed))
        if self._unclaimed:
            self._worker.notify()
        self._worker = None

    def abort(self) -> None:
        """The transaction did not commit: nothing was claimed."""
        if self._worker is not None:
            self._worker._release(self._slots)
            self._worker = None


def _step_span(
    instance: InstanceRow, event: EventRow, index: int, step: dict, attempt: int
) -> AbstractContextManager[Span]:
    """An attempt's span: a child of the event's ingest span.

    A replay, redrive or test run was asked for later, by someone else: its
    steps start a new trace that links to the ingest instead of stretching it.
    """
    origin = stored_context(event.traceparent, event.tracestate)
    attributes: dict[str, str | int] = {
        "eventflow.organization_id": instance.organization_id,
        "eventflow.project_id": instance.project_id,
        "eventflow.environment": instance.environment,
        "eventflow.instance_id": str(instance.id),
        "eventflow.workflow_id": str(instance.workflow_id),
        "eventflow.workflow_version": instance.workflow_version,
        "eventflow.step.index": index,
        "eventflow.step.type": str(step["type"]),
        "eventflow.step.attempt": attempt,
        "cloudevents.event_id": event.event_id,
    }
    if instance.run_key in ("", "replay"):
        return tracer.start_as_current_span("eventflow.step", context=origin, attributes=attributes)
    ingest = trace.get_current_span(origin).get_span_context()
    links = [Link(ingest)] if ingest.is_valid else []
    return tracer.start_as_current_span(
        "eventflow.step", context=Context(), attributes=attributes, links=links
    )


def _end_step(span: Span, outcome: Outcome) -> None:
    span.set_attribute("eventflow.step.outcome", outcome.kind)
    if outcome.kind in ("retryable", "final"):
        # The reason code only: a guest's error text is its own to fill.
        span.set_attribute("eventflow.reason", outcome.reason)
        span.set_status(Status(StatusCode.ERROR, outcome.reason))


def _step(instance: InstanceRow) -> dict[str, Any]:
    return dict(instance.definition["steps"][instance.next_step])


def _startable(instance: InstanceRow) -> bool:
    """Free to start its step at once: not held, and not a delay (whose timer is its own)."""
    return instance.hold is None and _step(instance)["type"] != "delay"


def _timeout(step: dict[str, Any]) -> timedelta:
    return timedelta(milliseconds=int(step.get("retry", {}).get("timeout_ms", 30000)))


def _released() -> dict[str, object]:
    return {"claimed_by": None, "claim_expires": None}


def _now() -> datetime:
    return datetime.now(UTC)


def _alive(worker: str) -> bool:
    """Whether the process named in a worker name (host:pid:token) still runs."""
    try:
        pid = int(worker.split(":")[1])
    except (IndexError, ValueError):
        return True  # not ours to judge
    return pid_running(pid)


def derived_event(
    instance: InstanceRow, index: int, cause: EventRow, derived: dict[str, Any]
) -> OutgoingEvent:
    return OutgoingEvent(
        event_id=str(uuid.uuid5(DERIVED_IDS, f"{instance.id}:{index}")),
        source=f"eventflow/workflows/{instance.workflow_id}",
        type=derived["type"],
        organization_id=instance.organization_id,
        project_id=instance.project_id,
        data_json=json.dumps(
            derived["payload"], ensure_ascii=False, separators=(",", ":")
        ).encode(),
        time=_now(),
        environment=instance.environment,
        # A replay's derived events are replays too (SPEC §8).
        replay_skip_side_effects=instance.skip_side_effects or cause.replay_skip_side_effects,
        test_run=instance.is_test,
        causation_id=cause.event_id,
        correlation_id=cause.correlation_id or cause.event_id,
        depth=cause.depth + 1,
    )
