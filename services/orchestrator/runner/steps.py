"""Running one attempt of one step: custom_action, webhook (delay is the worker's).

Returns an Outcome; never raises for a failure the policy can handle.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import grpc
from eventflow.executor.v1 import executor_service_pb2 as ex

from services.orchestrator.domain.outcomes import FINAL_GUEST_FAILURES, Outcome
from services.orchestrator.storage.events import EventRow
from services.orchestrator.storage.instances import InstanceRow
from services.orchestrator.webhooks import DeliveryResult, WebhookRequest

log = logging.getLogger(__name__)

# gRPC failures that say nothing about the request itself: try again later.
RETRYABLE_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.ABORTED,
    }
)


class Executor(Protocol):
    async def execute(self, request: ex.ExecuteRequest, timeout_s: float) -> ex.RunResult: ...


class Webhooks(Protocol):
    async def deliver(self, request: WebhookRequest) -> DeliveryResult: ...


class SigningSecrets(Protocol):
    async def for_workflow(self, workflow_id: str) -> list[str]: ...


@dataclass(frozen=True)
class StepContext:
    instance: InstanceRow
    event: EventRow
    index: int
    step: dict[str, Any]
    attempt: int


class StepRunner:
    def __init__(self, executor: Executor, webhooks: Webhooks, secrets: SigningSecrets) -> None:
        self._executor = executor
        self._webhooks = webhooks
        self._secrets = secrets

    async def run(self, ctx: StepContext) -> Outcome:
        kind = ctx.step["type"]
        if kind == "custom_action":
            return await self._custom_action(ctx)
        if kind == "webhook":
            return await self._webhook(ctx)
        return Outcome.final("UNSUPPORTED_STEP", f"unsupported step type: {kind}")

    async def _custom_action(self, ctx: StepContext) -> Outcome:
        request = ex.ExecuteRequest(
            organization_id=ctx.instance.organization_id,
            project_id=ctx.instance.project_id,
            environment=ctx.instance.environment,
            action=ctx.step["action"],
            version=int(ctx.step.get("version") or 0),
            payload_json=json.dumps(ctx.event.data, ensure_ascii=False),
        )
        timeout_s = int(ctx.step["retry"]["timeout_ms"]) / 1000
        try:
            result = await self._executor.execute(request, timeout_s)
        except grpc.aio.AioRpcError as error:
            if error.code() in RETRYABLE_CODES:
                return Outcome.retryable("EXECUTOR_UNAVAILABLE", f"executor: {error.code().name}")
            return Outcome.final(
                "EXECUTOR_REFUSED", f"executor: {error.code().name}: {error.details()}"
            )
        if not result.ok:
            if result.failure_reason in FINAL_GUEST_FAILURES:
                return Outcome.final(result.failure_reason, result.failure_message)
            return Outcome.retryable(result.failure_reason, result.failure_message)
        return Outcome.completed(_action_output(result))

    async def _webhook(self, ctx: StepContext) -> Outcome:
        if ctx.instance.skip_side_effects:
            return Outcome.skipped("replay: side effects suppressed")
        secrets = await self._secrets.for_workflow(str(ctx.instance.workflow_id))
        if not secrets:
            return Outcome.retryable(
                "NO_SIGNING_SECRET", "the workflow's signing secret is unavailable"
            )
        request = WebhookRequest(
            url=ctx.step["url"],
            method=ctx.step.get("method", "POST"),
            headers=dict(ctx.step.get("headers", {})),
            body=webhook_body(ctx),
            # Stable across attempts: receivers use it to deduplicate.
            msg_id=f"msg_{ctx.instance.id.hex}_{ctx.index}",
            secret=secrets[0],
            previous_secret=secrets[1] if len(secrets) > 1 else "",
            timeout_s=int(ctx.step["retry"]["timeout_ms"]) / 1000,
        )
        delivered = await self._webhooks.deliver(request)
        if delivered.ok:
            return Outcome.completed({"status": delivered.status})
        error = f"webhook: {delivered.error or delivered.status}"
        if delivered.retryable:
            return Outcome.retryable("WEBHOOK_FAILED", error, delivered.retry_after_s)
        return Outcome.final("WEBHOOK_REFUSED" if delivered.refused else "WEBHOOK_FAILED", error)


def webhook_body(ctx: StepContext) -> bytes:
    """The event envelope a receiver gets (CloudEvents attributes + where it came from)."""
    event = ctx.event
    envelope = {
        "id": event.event_id,
        "type": event.type,
        "source": event.source,
        "subject": event.subject,
        "time": _iso(event.time),
        "environment": event.environment,
        "data": event.data,
        "workflow": {"id": str(ctx.instance.workflow_id), "version": ctx.instance.workflow_version},
        "instance": str(ctx.instance.id),
        "step": ctx.index,
    }
    return json.dumps(envelope, ensure_ascii=False, separators=(",", ":")).encode()


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _action_output(result: ex.RunResult) -> dict[str, Any]:
    output: dict[str, Any] = {"data": json.loads(result.output_json or "{}")}
    output["action"] = {"id": result.action_id, "version": result.version}
    if result.HasField("projection"):
        p = result.projection
        output["projection"] = {
            "name": p.name,
            "entity_type": p.entity_type or None,
            "entity_id": p.entity_id or None,
            "title": p.title,
            "status": p.status,
            "data": json.loads(p.data_json or "null"),
        }
    if result.HasField("derived_event"):
        output["derived_event"] = {
            "type": result.derived_event.type,
            "payload": json.loads(result.derived_event.payload_json or "{}"),
        }
    output["metrics"] = {
        "fuel_used": result.fuel_used,
        "duration_us": result.duration_us,
        "peak_memory_bytes": result.peak_memory_bytes,
    }
    return output
