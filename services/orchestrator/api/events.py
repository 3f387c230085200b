"""EventService: publishing and reading events with their reactions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC
from typing import Any, TypeAlias

import grpc
from eventflow.orchestrator.v1 import event_service_pb2 as pb
from eventflow.orchestrator.v1 import event_service_pb2_grpc as pb_grpc

from libs.auth import Role, authorize, current_principal, requires
from services.orchestrator.api.convert import event_proto, reaction_proto
from services.orchestrator.publishing import Publisher
from services.orchestrator.reads import Reads
from services.orchestrator.replay import Replays

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class EventServicer(pb_grpc.EventServiceServicer):
    def __init__(self, publisher: Publisher, reads: Reads, replays: Replays) -> None:
        self._publisher = publisher
        self._reads = reads
        self._replays = replays

    @requires(Role.DEVELOPER)
    async def Publish(self, request: pb.PublishRequest, context: Context) -> pb.PublishResponse:
        ids = await self._publisher.publish(current_principal(), [request.event], batch=False)
        return pb.PublishResponse(event_id=ids[0])

    @requires(Role.DEVELOPER)
    async def PublishBatch(
        self, request: pb.PublishBatchRequest, context: Context
    ) -> pb.PublishBatchResponse:
        ids = await self._publisher.publish(current_principal(), list(request.events), batch=True)
        return pb.PublishBatchResponse(event_ids=ids)

    @requires(Role.VIEWER)
    async def GetEvent(self, request: pb.GetEventRequest, context: Context) -> pb.GetEventResponse:
        row = await self._reads.event(
            current_principal(), request.id, request.project_id, request.environment
        )
        return pb.GetEventResponse(event=event_proto(row))

    @requires(Role.VIEWER)
    async def ListEventReactions(
        self, request: pb.ListEventReactionsRequest, context: Context
    ) -> pb.ListEventReactionsResponse:
        views = await self._reads.reactions(
            current_principal(), request.event_id, request.project_id, request.environment
        )
        return pb.ListEventReactionsResponse(reactions=[reaction_proto(v) for v in views])

    @requires(Role.DEVELOPER)
    async def ReplayEvent(
        self, request: pb.ReplayEventRequest, context: Context
    ) -> pb.ReplayEventResponse:
        replay_id, started = await self._replays.replay_event(
            current_principal(),
            request.event_id,
            request.project_id,
            request.environment,
            request.with_side_effects,
        )
        return pb.ReplayEventResponse(replay_id=replay_id, instance_ids=[str(i) for i in started])

    async def ReplayEvents(
        self, request: pb.ReplayEventsRequest, context: Context
    ) -> AsyncIterator[pb.ReplayEventsResponse]:
        who = authorize(Role.DEVELOPER)
        progress = self._replays.replay_events(
            who,
            request.project_id,
            request.environment,
            request.type,
            request.start_time.ToDatetime(tzinfo=UTC) if request.HasField("start_time") else None,
            request.end_time.ToDatetime(tzinfo=UTC) if request.HasField("end_time") else None,
            request.with_side_effects,
        )
        async for step in progress:
            yield pb.ReplayEventsResponse(
                replay_id=step.replay_id,
                matched=step.matched,
                replayed=step.replayed,
                instances_started=step.instances_started,
                done=step.done,
            )
