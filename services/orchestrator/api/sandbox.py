"""SandboxService: protobuf in, use case, protobuf out."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from eventflow.orchestrator.v1 import sandbox_service_pb2 as pb
from eventflow.orchestrator.v1 import sandbox_service_pb2_grpc as pb_grpc

from libs.auth import Role, current_principal, requires
from services.orchestrator.sandbox import Sandbox

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class SandboxServicer(pb_grpc.SandboxServiceServicer):
    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox

    @requires(Role.DEVELOPER)
    async def ResetSandbox(
        self, request: pb.ResetSandboxRequest, context: Context
    ) -> pb.ResetSandboxResponse:
        counts = await self._sandbox.reset(current_principal(), request.project_id)
        return pb.ResetSandboxResponse(
            events_deleted=counts.events,
            instances_deleted=counts.instances,
            dead_letters_deleted=counts.dead_letters,
            projections_deleted=counts.projections,
        )
