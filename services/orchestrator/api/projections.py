"""ProjectionService: protobuf in, use case, protobuf out."""

from __future__ import annotations

import json
from typing import Any, TypeAlias

import grpc
from eventflow.orchestrator.v1 import projection_pb2
from eventflow.orchestrator.v1 import projection_service_pb2 as pb
from eventflow.orchestrator.v1 import projection_service_pb2_grpc as pb_grpc

from libs.auth import Role, current_principal, requires
from libs.timestamps import timestamp
from services.orchestrator.projections import Key, Projections
from services.orchestrator.storage.projections import ProjectionRow, ProjectionWriteRow

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class ProjectionServicer(pb_grpc.ProjectionServiceServicer):
    def __init__(self, projections: Projections) -> None:
        self._projections = projections

    @requires(Role.VIEWER)
    async def GetProjection(
        self, request: pb.GetProjectionRequest, context: Context
    ) -> pb.GetProjectionResponse:
        row = await self._projections.get(
            current_principal(),
            request.project_id,
            request.environment,
            Key(request.name, request.entity_type, request.entity_id),
        )
        return pb.GetProjectionResponse(projection=projection_proto(row))

    @requires(Role.VIEWER)
    async def ListProjections(
        self, request: pb.ListProjectionsRequest, context: Context
    ) -> pb.ListProjectionsResponse:
        rows, token = await self._projections.list_page(
            current_principal(),
            request.project_id,
            request.environment,
            request.name,
            request.entity_type,
            request.status,
            request.page_size,
            request.page_token,
        )
        return pb.ListProjectionsResponse(
            projections=[projection_proto(r) for r in rows], next_page_token=token
        )

    @requires(Role.VIEWER)
    async def ListProjectionHistory(
        self, request: pb.ListProjectionHistoryRequest, context: Context
    ) -> pb.ListProjectionHistoryResponse:
        writes, token = await self._projections.history(
            current_principal(),
            request.project_id,
            request.environment,
            Key(request.name, request.entity_type, request.entity_id),
            request.page_size,
            request.page_token,
        )
        return pb.ListProjectionHistoryResponse(
            writes=[projection_write_proto(w) for w in writes], next_page_token=token
        )


def projection_proto(row: ProjectionRow) -> projection_pb2.Projection:
    return projection_pb2.Projection(
        id=str(row.id),
        organization_id=row.organization_id,
        project_id=row.project_id,
        environment=row.environment,
        name=row.name,
        entity_type=row.entity_type or "",
        entity_id=row.entity_id or "",
        title=row.title,
        status=row.status,
        data_json=json.dumps(row.data, ensure_ascii=False),
        last_event_id=row.last_event_id,
        last_instance_id=str(row.last_instance),
        create_time=timestamp(row.create_time),
        update_time=timestamp(row.update_time),
    )


def projection_write_proto(row: ProjectionWriteRow) -> projection_pb2.ProjectionWrite:
    return projection_pb2.ProjectionWrite(
        event_id=row.event_id,
        instance_id=str(row.instance_id),
        workflow_id=str(row.workflow_id),
        workflow_version=row.workflow_version,
        step=row.step,
        title=row.title,
        status=row.status,
        data_json=json.dumps(row.data, ensure_ascii=False),
        replay=row.replay,
        write_time=timestamp(row.write_time),
    )
