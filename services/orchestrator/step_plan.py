"""What each step of a workflow would do now, without doing it (dry runs, SPEC §7).

A custom action is resolved by the executor from the same catalog Execute
uses, so the version reported is the version that would run and a refusal
is the refusal a run would get. A webhook's host is resolved and judged by
the egress guard under the deployment's policy, as delivery would judge it.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field, replace
from ipaddress import ip_address
from typing import Any, Protocol

import grpc
from aiohttp.abc import AbstractResolver
from eventflow.executor.v1 import executor_service_pb2 as ex
from yarl import URL

from services.orchestrator.webhooks.egress import (
    EgressPolicy,
    EgressRefused,
    VettingResolver,
    check_url,
)

WEBHOOK_REFUSED = "WEBHOOK_REFUSED"
WEBHOOK_UNRESOLVED = "WEBHOOK_UNRESOLVED"
EXECUTOR_UNAVAILABLE = "EXECUTOR_UNAVAILABLE"
UNSUPPORTED_STEP = "UNSUPPORTED_STEP"
DNS_TIMEOUT_S = 5.0


class ActionResolver(Protocol):
    async def resolve_action(
        self, request: ex.ResolveActionRequest
    ) -> ex.ResolveActionResponse: ...


@dataclass(frozen=True)
class PlannedStep:
    index: int
    name: str
    type: str
    runnable: bool
    max_attempts: int
    problem_reason: str = ""
    problem: str = ""
    action: str = ""
    action_id: str = ""
    action_version: int = 0
    url: str = ""
    addresses: list[str] = field(default_factory=list)
    duration_ms: int = 0


@dataclass(frozen=True)
class Target:
    """A webhook URL's allowed addresses, or why it cannot be reached."""

    addresses: list[str]
    problem_reason: str = ""
    problem: str = ""


class StepPlanner:
    def __init__(
        self,
        actions: ActionResolver,
        egress: EgressPolicy,
        dns: AbstractResolver | None = None,
    ) -> None:
        self._actions = actions
        self._egress = egress
        # Stands in for public DNS in tests; the policy still judges its answers.
        self._dns = dns

    async def plan(self, organization_id: str, definition: dict[str, Any]) -> list[PlannedStep]:
        return [
            await self._step(organization_id, index, step)
            for index, step in enumerate(definition.get("steps", []))
        ]

    async def _step(self, organization_id: str, index: int, step: dict[str, Any]) -> PlannedStep:
        kind = str(step.get("type", ""))
        base = PlannedStep(
            index=index,
            name=str(step.get("name", "")),
            type=kind,
            runnable=True,
            max_attempts=int(step.get("retry", {}).get("max_attempts") or 0),
        )
        if kind == "delay":
            return replace(base, duration_ms=int(step["duration_ms"]))
        if kind == "custom_action":
            return await self._custom_action(organization_id, step, base)
        if kind == "webhook":
            target = await self.webhook_target(str(step["url"]))
            return replace(
                base,
                runnable=not target.problem_reason,
                url=str(step["url"]),
                addresses=target.addresses,
                problem_reason=target.problem_reason,
                problem=target.problem,
            )
        return replace(
            base,
            runnable=False,
            problem_reason=UNSUPPORTED_STEP,
            problem=f"unsupported step type: {kind}",
        )

    async def _custom_action(
        self, organization_id: str, step: dict[str, Any], base: PlannedStep
    ) -> PlannedStep:
        ref = str(step["action"])
        request = ex.ResolveActionRequest(
            organization_id=organization_id, action=ref, version=int(step.get("version") or 0)
        )
        try:
            answer = await self._actions.resolve_action(request)
        except grpc.aio.AioRpcError as error:
            return replace(
                base,
                runnable=False,
                action=ref,
                problem_reason=EXECUTOR_UNAVAILABLE,
                problem=f"executor: {error.code().name}",
            )
        if not answer.runnable:
            return replace(
                base,
                runnable=False,
                action=ref,
                problem_reason=answer.refusal_reason,
                problem=answer.refusal_message,
            )
        return replace(
            base, action=answer.name, action_id=answer.action_id, action_version=answer.version
        )

    async def webhook_target(self, url: str) -> Target:
        try:
            check_url(url, self._egress)
        except EgressRefused as refused:
            return Target([], WEBHOOK_REFUSED, refused.reason)
        parsed = URL(url)
        host = parsed.host or ""
        # check_url has judged an IP-literal host already; it never reaches DNS.
        literal = _literal(host)
        if literal is not None:
            return Target([literal])
        resolver = VettingResolver(self._egress, upstream=self._dns)
        try:
            async with asyncio.timeout(DNS_TIMEOUT_S):
                answers = await resolver.resolve(host, parsed.port or 0, socket.AF_UNSPEC)
        except EgressRefused as refused:
            return Target([], WEBHOOK_REFUSED, refused.reason)
        except TimeoutError:
            return Target(
                [], WEBHOOK_UNRESOLVED, f"{host} did not resolve within {DNS_TIMEOUT_S:g} s"
            )
        except OSError as error:
            return Target(
                [], WEBHOOK_UNRESOLVED, f"{host} does not resolve: {error.strerror or error}"
            )
        finally:
            await resolver.close()
        return Target(sorted({answer["host"] for answer in answers}))


def _literal(host: str) -> str | None:
    try:
        return str(ip_address(host.removesuffix(".")))
    except ValueError:
        return None
