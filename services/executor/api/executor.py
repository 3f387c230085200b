"""ExecutorService: internal, reached over mutual TLS by named services only."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from eventflow.executor.v1 import executor_service_pb2 as pb
from eventflow.executor.v1 import executor_service_pb2_grpc as pb_grpc

from libs.auth import requires_service
from services.executor.execution import Execution

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class ExecutorServicer(pb_grpc.ExecutorServiceServicer):
    def __init__(self, execution: Execution) -> None:
        self._execution = execution

    @requires_service("orchestrator")
    async def Execute(self, request: pb.ExecuteRequest, context: Context) -> pb.ExecuteResponse:
        return pb.ExecuteResponse(result=await self._execution.execute(request))

    @requires_service("orchestrator")
    async def ResolveAction(
        self, request: pb.ResolveActionRequest, context: Context
    ) -> pb.ResolveActionResponse:
        return self._execution.resolve(request)

    @requires_service("governance")
    async def ValidateModule(
        self, request: pb.ValidateModuleRequest, context: Context
    ) -> pb.ValidateModuleResponse:
        return await self._execution.validate(request.wasm)

    @requires_service("governance")
    async def Simulate(self, request: pb.SimulateRequest, context: Context) -> pb.SimulateResponse:
        return pb.SimulateResponse(result=await self._execution.simulate(request))
