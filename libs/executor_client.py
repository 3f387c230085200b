"""Calls to the executor's internal API over mutual TLS (governance, orchestrator)."""

from __future__ import annotations

import grpc
from eventflow.executor.v1 import executor_service_pb2 as pb
from eventflow.executor.v1 import executor_service_pb2_grpc as pb_grpc

from libs.identity import ServiceCertificates

# A compile of a hostile module may take the executor its full compile bound.
VALIDATE_TIMEOUT_S = 30.0
RUN_TIMEOUT_S = 30.0


class ExecutorClient:
    def __init__(self, target: str, certificates: ServiceCertificates) -> None:
        self._target = target
        self._certificates = certificates
        self._channel: grpc.aio.Channel | None = None

    def _stub(self) -> pb_grpc.ExecutorServiceStub:
        # Created on first use, inside the event loop that will drive it.
        if self._channel is None:
            self._channel = grpc.aio.secure_channel(
                self._target,
                self._certificates.channel_credentials(),
                options=[
                    ("grpc.max_send_message_length", 16 * 1024 * 1024),
                    # Only a certificate naming the executor may answer.
                    ("grpc.ssl_target_name_override", "executor"),
                ],
            )
        return pb_grpc.ExecutorServiceStub(self._channel)

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

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
