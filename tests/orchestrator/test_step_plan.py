"""What a dry run says each step would do: the executor's answer for actions, the
egress guard's verdict on resolved addresses for webhooks (SPEC §7, §9)."""

from __future__ import annotations

import socket
from typing import Any

import grpc
from aiohttp.abc import AbstractResolver, ResolveResult
from eventflow.executor.v1 import executor_service_pb2 as ex

from services.orchestrator.step_plan import StepPlanner
from services.orchestrator.webhooks.egress import DEFAULT_POLICY, EgressPolicy

PRIVATE = EgressPolicy(allow_private=True)


class FakeDns(AbstractResolver):
    """Public DNS stand-in: fixed answers per host, anything else does not resolve."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked.append(host)
        if host not in self.answers:
            raise OSError(socket.EAI_NONAME, "Name or service not known")
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for address in self.answers[host]
        ]

    async def close(self) -> None:
        pass


class FakeExecutor:
    def __init__(self, answer: ex.ResolveActionResponse | Exception) -> None:
        self.answer = answer
        self.asked: list[ex.ResolveActionRequest] = []

    async def resolve_action(self, request: ex.ResolveActionRequest) -> ex.ResolveActionResponse:
        self.asked.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


DNS = FakeDns(
    {
        "hooks.example.com": ["93.184.215.14", "10.0.0.5"],
        "internal.example.com": ["10.1.2.3"],
        "metadata.example.com": ["169.254.169.254"],
    }
)


def planner(policy: EgressPolicy = DEFAULT_POLICY, executor: Any = None) -> StepPlanner:
    return StepPlanner(executor or FakeExecutor(ex.ResolveActionResponse()), policy, DNS)


async def test_only_the_addresses_the_guard_allows_are_reported() -> None:
    target = await planner().webhook_target("https://hooks.example.com/orders")
    assert (target.addresses, target.problem_reason) == (["93.184.215.14"], "")
    opened = await planner(PRIVATE).webhook_target("https://hooks.example.com/orders")
    assert opened.addresses == ["10.0.0.5", "93.184.215.14"]


async def test_private_targets_follow_the_deployment_setting() -> None:
    refused = await planner().webhook_target("http://internal.example.com/x")
    assert refused.problem_reason == "WEBHOOK_REFUSED" and "private address" in refused.problem
    assert (await planner(PRIVATE).webhook_target("http://internal.example.com/x")).addresses == [
        "10.1.2.3"
    ]
    loopback = await planner().webhook_target("http://127.0.0.1:8080/x")
    assert loopback.problem_reason == "WEBHOOK_REFUSED" and "loopback" in loopback.problem
    assert (await planner(PRIVATE).webhook_target("http://127.0.0.1:8080/x")).addresses == [
        "127.0.0.1"
    ]


async def test_metadata_addresses_stay_refused_under_every_policy() -> None:
    for url in ("http://169.254.169.254/latest", "http://metadata.example.com/"):
        target = await planner(PRIVATE).webhook_target(url)
        assert target.problem_reason == "WEBHOOK_REFUSED", url
        assert "cloud metadata address" in target.problem and target.addresses == []


async def test_bad_urls_are_refused_without_asking_dns() -> None:
    asked = len(DNS.asked)
    for url, words in (
        ("ftp://hooks.example.com/x", "scheme"),
        ("https://user:pw@hooks.example.com/x", "userinfo"),
        ("http://2130706433/", "non-canonical"),
    ):
        target = await planner(PRIVATE).webhook_target(url)
        assert target.problem_reason == "WEBHOOK_REFUSED" and words in target.problem, url
    assert len(DNS.asked) == asked


async def test_a_host_that_does_not_resolve_is_reported_as_such() -> None:
    target = await planner().webhook_target("https://nowhere.example.com/x")
    assert target.problem_reason == "WEBHOOK_UNRESOLVED"
    assert "nowhere.example.com" in target.problem


async def test_steps_are_planned_in_order_with_their_attempt_budgets() -> None:
    executor = FakeExecutor(
        ex.ResolveActionResponse(runnable=True, action_id="a-1", name="score", version=4)
    )
    definition = {
        "steps": [
            {
                "type": "custom_action",
                "name": "score",
                "action": "a-1",
                "version": 4,
                "retry": {"max_attempts": 2},
            },
            {"type": "delay", "duration_ms": 60000, "retry": {"max_attempts": 3}},
            {"type": "webhook", "url": "https://hooks.example.com/x", "retry": {"max_attempts": 5}},
        ]
    }
    score, wait, hook = await planner(executor=executor).plan("acme", definition)
    assert executor.asked == [
        ex.ResolveActionRequest(organization_id="acme", action="a-1", version=4)
    ]
    assert (score.runnable, score.action, score.action_id, score.action_version) == (
        True,
        "score",
        "a-1",
        4,
    )
    assert (score.max_attempts, wait.duration_ms, wait.index, hook.max_attempts) == (2, 60000, 1, 5)
    assert hook.addresses == ["93.184.215.14"] and hook.runnable


async def test_an_unreachable_executor_makes_the_step_not_runnable() -> None:
    down = grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "connection refused"
    )
    [step] = await planner(executor=FakeExecutor(down)).plan(
        "acme", {"steps": [{"type": "custom_action", "action": "score"}]}
    )
    assert (step.runnable, step.problem_reason, step.action) == (
        False,
        "EXECUTOR_UNAVAILABLE",
        "score",
    )
