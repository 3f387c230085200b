"""InstanceService and DeadLetterService: protobuf in, use case, protobuf out."""

from __future__ import annotations

from datetime import UTC
from typing import Any, TypeAlias

import grpc
from eventflow.orchestrator.v1 import instance_service_pb2 as pb
from eventflow.orchestrator.v1 import instance_service_pb2_grpc as pb_grpc

from libs.auth import Role, current_principal, requires
from services.orchestrator.api.convert import (
    dead_letter_proto,
    hold_proto,
    instance_proto,
    log_proto,
)
from services.orchestrator.control import Control, scope_of
from services.orchestrator.dlq import DeadLetterQueue
from services.orchestrator.reads import Reads
from services.orchestrator.storage.holds import Scope

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class InstanceServicer(pb_grpc.InstanceServiceServicer):
    def __init__(self, reads: Reads, control: Control) -> None:
        self._reads = reads
        self._control = control

    @requires(Role.VIEWER)
    async def ListInstances(
        self, request: pb.ListInstancesRequest, context: Context
    ) -> pb.ListInstancesResponse:
        rows, token = await self._reads.instances(
            current_principal(),
            request.project_id,
            request.workflow_id,
            request.status,
            request.page_size,
            request.page_token,
        )
        return pb.ListInstancesResponse(
            instances=[instance_proto(r) for r in rows], next_page_token=token
        )

    @requires(Role.VIEWER)
    async def GetInstance(
        self, request: pb.GetInstanceRequest, context: Context
    ) -> pb.GetInstanceResponse:
        row = await self._reads.instance(current_principal(), request.id)
        return pb.GetInstanceResponse(instance=instance_proto(row))

    @requires(Role.VIEWER)
    async def ListInstanceLog(
        self, request: pb.ListInstanceLogRequest, context: Context
    ) -> pb.ListInstanceLogResponse:
        entries = await self._reads.log(current_principal(), request.instance_id)
        return pb.ListInstanceLogResponse(entries=[log_proto(e) for e in entries])

    @requires(Role.DEVELOPER)
    async def PauseInstance(
        self, request: pb.PauseInstanceRequest, context: Context
    ) -> pb.PauseInstanceResponse:
        row = await self._control.pause(current_principal(), request.id)
        return pb.PauseInstanceResponse(instance=instance_proto(row))

    @requires(Role.DEVELOPER)
    async def ResumeInstance(
        self, request: pb.ResumeInstanceRequest, context: Context
    ) -> pb.ResumeInstanceResponse:
        row = await self._control.resume(current_principal(), request.id)
        return pb.ResumeInstanceResponse(instance=instance_proto(row))

    @requires(Role.DEVELOPER)
    async def CancelInstance(
        self, request: pb.CancelInstanceRequest, context: Context
    ) -> pb.CancelInstanceResponse:
        row = await self._control.cancel(current_principal(), request.id)
        return pb.CancelInstanceResponse(instance=instance_proto(row))

    @requires(Role.DEVELOPER)
    async def PauseInstances(
        self, request: pb.PauseInstancesRequest, context: Context
    ) -> pb.PauseInstancesResponse:
        paused, hold = await self._control.pause_scope(current_principal(), _scope(request.scope))
        return pb.PauseInstancesResponse(paused=paused, hold=hold_proto(hold))

    @requires(Role.DEVELOPER)
    async def ResumeInstances(
        self, request: pb.ResumeInstancesRequest, context: Context
    ) -> pb.ResumeInstancesResponse:
        resumed = await self._control.resume_scope(current_principal(), _scope(request.scope))
        return pb.ResumeInstancesResponse(resumed=resumed)

    @requires(Role.DEVELOPER)
    async def CancelInstances(
        self, request: pb.CancelInstancesRequest, context: Context
    ) -> pb.CancelInstancesResponse:
        canceled = await self._control.cancel_scope(current_principal(), _scope(request.scope))
        return pb.CancelInstancesResponse(canceled=canceled)

    @requires(Role.VIEWER)
    async def ListHolds(
        self, request: pb.ListHoldsRequest, context: Context
    ) -> pb.ListHoldsResponse:
        found = await self._control.holds(current_principal())
        return pb.ListHoldsResponse(holds=[hold_proto(h) for h in found])


def _scope(scope: pb.InstanceScope) -> Scope:
    return scope_of(current_principal(), scope.project_id, scope.subject, scope.organization)


class DeadLetterServicer(pb_grpc.DeadLetterServiceServicer):
    def __init__(self, queue: DeadLetterQueue) -> None:
        self._queue = queue

    @requires(Role.VIEWER)
    async def ListDeadLetters(
        self, request: pb.ListDeadLettersRequest, context: Context
    ) -> pb.ListDeadLettersResponse:
        rows, token = await self._queue.list(
            current_principal(),
            request.project_id,
            request.workflow_id,
            request.reason,
            request.status,
            request.page_size,
            request.page_token,
            (
                request.create_after.ToDatetime(tzinfo=UTC)
                if request.HasField("create_after")
                else None,
                request.create_before.ToDatetime(tzinfo=UTC)
                if request.HasField("create_before")
                else None,
            ),
        )
        return pb.ListDeadLettersResponse(
            dead_letters=[dead_letter_proto(r) for r in rows], next_page_token=token
        )

    @requires(Role.VIEWER)
    async def GetDeadLetter(
        self, request: pb.GetDeadLetterRequest, context: Context
    ) -> pb.GetDeadLetterResponse:
        row = await self._queue.get(current_principal(), request.id)
        return pb.GetDeadLetterResponse(dead_letter=dead_letter_proto(row))

    @requires(Role.DEVELOPER)
    async def RedriveDeadLetter(
        self, request: pb.RedriveDeadLetterRequest, context: Context
    ) -> pb.RedriveDeadLetterResponse:
        row, instance_id = await self._queue.redrive(
            current_principal(), request.id, request.from_start
        )
        return pb.RedriveDeadLetterResponse(
            dead_letter=dead_letter_proto(row), instance_id=str(instance_id)
        )

    @requires(Role.DEVELOPER)
    async def DiscardDeadLetter(
        self, request: pb.DiscardDeadLetterRequest, context: Context
    ) -> pb.DiscardDeadLetterResponse:
        row = await self._queue.discard(current_principal(), request.id)
        return pb.DiscardDeadLetterResponse(dead_letter=dead_letter_proto(row))
