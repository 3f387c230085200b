"""The orchestrator's pure rules: re-entry, retry schedule, step outcome classes."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from eventflow.executor.v1 import executor_service_pb2 as ex

from services.orchestrator.domain.reentry import History, decide, subject_of
from services.orchestrator.domain.retry import may_retry, retry_delay
from services.orchestrator.runner.steps import StepContext, StepRunner
from services.orchestrator.storage.events import EventRow
from services.orchestrator.storage.instances import InstanceRow
from services.orchestrator.webhooks import DeliveryResult, WebhookRequest

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_the_subject_is_the_first_present_field_in_spec_order() -> None:
    assert subject_of({"email": "e", "userId": "u", "audienceId": "a"}) == "a"
    assert subject_of({"email": "e", "targetUserId": "t"}) == "t"
    assert subject_of({"userId": 42}) == "42"
    assert subject_of({"userId": "", "email": "e"}) == "e"
    assert subject_of({"name": "n"}) is None


def test_once_blocks_while_an_unfailed_instance_exists() -> None:
    once = {"mode": "once"}
    assert not decide(once, History(True, NOW), NOW).allowed
    assert decide(once, History(False, NOW), NOW).allowed  # only failed ones before
    assert decide(once, History(False, None), NOW).allowed


def test_cooldown_blocks_within_the_window_only() -> None:
    cooldown = {"mode": "cooldown", "cooldown_minutes": 10}
    assert not decide(cooldown, History(True, NOW - timedelta(minutes=9)), NOW).allowed
    assert decide(cooldown, History(True, NOW - timedelta(minutes=10)), NOW).allowed
    assert decide({"mode": "always"}, History(True, NOW), NOW).allowed


def test_exponential_backoff_doubles_within_jitter_and_fixed_stays() -> None:
    rng = random.Random(7)
    exponential = {"backoff": "exponential", "backoff_delay_ms": 1000}
    for attempt, base in ((1, 1.0), (2, 2.0), (3, 4.0)):
        delay = retry_delay(exponential, attempt, rng).total_seconds()
        assert base * 0.8 <= delay <= base * 1.2
    fixed = {"backoff": "fixed", "backoff_delay_ms": 5000}
    assert 4.0 <= retry_delay(fixed, 5, rng).total_seconds() <= 6.0
    assert retry_delay(exponential, 40, rng) == timedelta(hours=1)  # capped


def test_attempts_stop_at_max_attempts() -> None:
    assert may_retry({"max_attempts": 3}, 2) and not may_retry({"max_attempts": 3}, 3)


class FakeExecutor:
    def __init__(self, outcome: ex.RunResult | Exception) -> None:
        self.outcome = outcome

    async def execute(self, request: ex.ExecuteRequest, timeout_s: float) -> ex.RunResult:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


class FakeWebhooks:
    def __init__(self, result: DeliveryResult) -> None:
        self.result = result
        self.sent: list[WebhookRequest] = []

    async def deliver(self, request: WebhookRequest) -> DeliveryResult:
        self.sent.append(request)
        return self.result


class FakeSecrets:
    async def for_workflow(self, workflow_id: str) -> list[str]:
        return ["whsec_" + "A" * 43 + "="]


class Unavailable(grpc.aio.AioRpcError):
    def __init__(self) -> None:
        super().__init__(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata())


def context(step: dict[str, Any], *, replay: bool = False) -> StepContext:
    instance = InstanceRow(
        id=uuid.uuid4(),
        organization_id="o",
        project_id="p",
        environment="production",
        workflow_id=uuid.uuid4(),
        workflow_version=1,
        definition={"steps": [step]},
        event=uuid.uuid4(),
        event_id="e-1",
        subject=None,
        status="running",
        next_step=0,
        attempt=1,
        waiting=False,
        wake_time=NOW,
        claimed_by="w",
        claim_expires=NOW,
        is_test=False,
        skip_side_effects=replay,
        run_key="",
        create_time=NOW,
        update_time=NOW,
    )
    event = EventRow(
        id=instance.event,
        organization_id="o",
        project_id="p",
        environment="production",
        event_id="e-1",
        type="a.b",
        source="s",
        subject=None,
        data={"x": 1},
        time=NOW,
        replay_skip_side_effects=replay,
        causation_id=None,
        correlation_id=None,
        depth=0,
    )
    return StepContext(instance, event, 0, step, 1)


ACTION = {"type": "custom_action", "action": "a", "retry": {"timeout_ms": 30000}}
HOOK = {"type": "webhook", "url": "https://x.example.com", "retry": {"timeout_ms": 30000}}


@pytest.mark.parametrize(
    ("result", "kind", "reason"),
    [
        (ex.RunResult(ok=True, output_json='{"a": 1}'), "completed", ""),
        (ex.RunResult(ok=False, failure_reason="FUEL_EXHAUSTED"), "final", "FUEL_EXHAUSTED"),
        (ex.RunResult(ok=False, failure_reason="ACTION_DISABLED"), "final", "ACTION_DISABLED"),
        (Unavailable(), "retryable", "EXECUTOR_UNAVAILABLE"),
    ],
    ids=["ok", "guest-failure", "governance-refusal", "executor-unavailable"],
)
async def test_custom_action_outcomes(result: Any, kind: str, reason: str) -> None:
    runner = StepRunner(
        FakeExecutor(result), FakeWebhooks(DeliveryResult(True, 200, False)), FakeSecrets()
    )
    outcome = await runner.run(context(ACTION))
    assert (outcome.kind, outcome.reason) == (kind, reason)


@pytest.mark.parametrize(
    ("result", "kind"),
    [
        (DeliveryResult(True, 204, False), "completed"),
        (DeliveryResult(False, 503, True, retry_after_s=7), "retryable"),
        (DeliveryResult(False, 410, False), "final"),
        (DeliveryResult(False, None, False, refused=True), "final"),
    ],
    ids=["2xx", "503", "410", "refused"],
)
async def test_webhook_outcomes(result: DeliveryResult, kind: str) -> None:
    hooks = FakeWebhooks(result)
    outcome = await StepRunner(FakeExecutor(ex.RunResult()), hooks, FakeSecrets()).run(
        context(HOOK)
    )
    assert outcome.kind == kind
    [sent] = hooks.sent
    assert sent.msg_id.startswith("msg_") and b'"data":{"x":1}' in sent.body


async def test_a_replay_skips_webhooks_without_sending() -> None:
    hooks = FakeWebhooks(DeliveryResult(True, 200, False))
    outcome = await StepRunner(FakeExecutor(ex.RunResult()), hooks, FakeSecrets()).run(
        context(HOOK, replay=True)
    )
    assert outcome.kind == "skipped" and hooks.sent == []
