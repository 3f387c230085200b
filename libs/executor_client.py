"""Calls to the executor's internal API over mutual TLS (governance, orchestrator)."""

from __future__ import annotations

import grpc
from eventflow.executor.v1 import executor_service_pb2 as pb
from eventflow.executor.v1 import executor_service_pb2_grpc as pb_grpc

from libs.identity import ServiceCertificates
from libs.internal_channel import InternalChannel

# A compile of a hostile module may take the executor its full compile bound.
VALIDATE_TIMEOUT_S = 30.0
RUN_TIMEOUT_S = 30.0
# Answered from the executor's in-memory catalog.
RESOLVE_TIMEOUT_S = 10.0


class ExecutorClient:
    def __init__(self, target: str, certificates: ServiceCertificates) -> None:
        self._channel = InternalChannel(target, certificates, "executor")
        self._stubs: tuple[grpc.aio.Channel, pb_grpc.ExecutorServiceStub] | None = None

    def _stub(self) -> pb_grpc.ExecutorServiceStub:
        """The stub of the open channel, made once per channel (not once per step run)."""
        channel = self._channel.get()
        if self._stubs is None or self._stubs[0] is not channel:
            self._stubs = (channel, pb_grpc.ExecutorServiceStub(channel))
        return self._stubs[1]

    async def validate_module(self, wasm: bytes) -> pb.ValidateModuleResponse:
        return await self._stub().ValidateModule(
            pb.ValidateModuleRequest(wasm=wasm), timeout=VALIDATE_TIMEOUT_S
        )

    async def simulate(self, request: pb.SimulateRequest) -> pb.RunResult:
        response = await self._stub().Simulate(request, timeout=RUN_TIMEOUT_S)
        return response.result

    async def execute(self, request: pb.ExecuteRequest, timeout_s: float) -> pb.RunResult:
        response = await self._stub().Execute(request, timeout=timeout_s)
        return response.result

    async def resolve_action(self, request: pb.ResolveActionRequest) -> pb.ResolveActionResponse:
        return await self._stub().ResolveAction(request, timeout=RESOLVE_TIMEOUT_S)

    async def close(self) -> None:
        await self._channel.close()
