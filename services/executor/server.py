"""Assembles the executor; used by `eventflow serve executor` and the dev stack."""

from __future__ import annotations

from dataclasses import dataclass

from eventflow.executor.v1 import executor_service_pb2_grpc

from libs.bus import Bus
from libs.bus import topics as bus_topics
from libs.server import ServiceBinding
from services.executor.api.executor import ExecutorServicer
from services.executor.catalog import ActionCatalog
from services.executor.events.action_state import ActionStateFeed
from services.executor.execution import Execution, ModuleSource, Sandbox, SecretSource


@dataclass
class Executor:
    bindings: list[ServiceBinding]
    catalog: ActionCatalog
    feed: ActionStateFeed
    sandbox: Sandbox
    bus: Bus

    async def start(self) -> None:
        await self.bus.ensure_topic(bus_topics.GOVERNANCE_ACTIONS, compacted=True)
        self.feed.start()

    async def stop(self) -> None:
        await self.feed.stop()


def build_executor(
    bus: Bus,
    sandbox: Sandbox,
    modules: ModuleSource,
    secrets: SecretSource,
    *,
    actions_disabled: bool = False,
) -> Executor:
    catalog = ActionCatalog(all_disabled=actions_disabled)
    execution = Execution(catalog, sandbox, modules, secrets)
    binding = ServiceBinding(
        "eventflow.executor.v1.ExecutorService",
        ExecutorServicer(execution),
        executor_service_pb2_grpc.add_ExecutorServiceServicer_to_server,
    )
    return Executor([binding], catalog, ActionStateFeed(catalog, bus), sandbox, bus)
