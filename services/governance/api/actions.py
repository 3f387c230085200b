"""ActionService: protobuf in, use case, protobuf out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import grpc
from eventflow.governance.v1 import action_service_pb2 as pb
from eventflow.governance.v1 import action_service_pb2_grpc as pb_grpc

from libs.auth import Role, current_principal, requires
from libs.errors import invalid_field
from services.governance import errors
from services.governance.actions import ActionCatalog, UploadHeader
from services.governance.api.convert import (
    action_proto,
    simulation_proto,
    usage_proto,
    version_proto,
)
from services.governance.domain.actions import MAX_MODULE_BYTES

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class ActionServicer(pb_grpc.ActionServiceServicer):
    def __init__(self, catalog: ActionCatalog) -> None:
        self._catalog = catalog

    @requires(Role.DEVELOPER)
    async def UploadActionVersion(
        self, request_iterator: AsyncIterator[pb.UploadActionVersionRequest], context: Context
    ) -> pb.UploadActionVersionResponse:
        header, module = await _read_upload(request_iterator)
        result = await self._catalog.upload(current_principal(), header, module)
        outcome = pb.UPLOAD_OUTCOME_CREATED if result.created else pb.UPLOAD_OUTCOME_UNCHANGED
        return pb.UploadActionVersionResponse(
            outcome=outcome,
            action=action_proto(result.action),
            version=version_proto(result.action.action.name, result.version),
        )

    @requires(Role.VIEWER)
    async def GetAction(
        self, request: pb.GetActionRequest, context: Context
    ) -> pb.GetActionResponse:
        view = await self._catalog.get(current_principal(), request.action)
        return pb.GetActionResponse(action=action_proto(view))

    @requires(Role.VIEWER)
    async def ListActions(
        self, request: pb.ListActionsRequest, context: Context
    ) -> pb.ListActionsResponse:
        views, token = await self._catalog.list_actions(
            current_principal(), request.page_size, request.page_token
        )
        return pb.ListActionsResponse(
            actions=[action_proto(v) for v in views], next_page_token=token
        )

    @requires(Role.VIEWER)
    async def ListActionVersions(
        self, request: pb.ListActionVersionsRequest, context: Context
    ) -> pb.ListActionVersionsResponse:
        view = await self._catalog.get(current_principal(), request.action)
        rows, token = await self._catalog.versions(
            current_principal(), request.action, request.page_size, request.page_token
        )
        return pb.ListActionVersionsResponse(
            versions=[version_proto(view.action.name, r) for r in rows], next_page_token=token
        )

    @requires(Role.VIEWER)
    async def GetActionVersion(
        self, request: pb.GetActionVersionRequest, context: Context
    ) -> pb.GetActionVersionResponse:
        action, version, reviews = await self._catalog.version(
            current_principal(), request.action, request.version
        )
        return pb.GetActionVersionResponse(version=version_proto(action.name, version, reviews))

    @requires(Role.ADMIN)
    async def ReviewActionVersion(
        self, request: pb.ReviewActionVersionRequest, context: Context
    ) -> pb.ReviewActionVersionResponse:
        action, version, reviews = await self._catalog.review(
            current_principal(), request.action, request.version, request.decision, request.comment
        )
        return pb.ReviewActionVersionResponse(version=version_proto(action.name, version, reviews))

    @requires(Role.ADMIN)
    async def EnableAction(
        self, request: pb.EnableActionRequest, context: Context
    ) -> pb.EnableActionResponse:
        view = await self._catalog.set_enabled(current_principal(), request.action, True)
        return pb.EnableActionResponse(action=action_proto(view))

    @requires(Role.ADMIN)
    async def DisableAction(
        self, request: pb.DisableActionRequest, context: Context
    ) -> pb.DisableActionResponse:
        view = await self._catalog.set_enabled(current_principal(), request.action, False)
        return pb.DisableActionResponse(action=action_proto(view))

    @requires(Role.VIEWER)
    async def ListActionUsages(
        self, request: pb.ListActionUsagesRequest, context: Context
    ) -> pb.ListActionUsagesResponse:
        view = await self._catalog.get(current_principal(), request.action)
        refs = [view.action.name, str(view.action.id)]
        rows = await self._catalog.usages(current_principal(), request.action)
        return pb.ListActionUsagesResponse(usages=[usage_proto(r, refs) for r in rows])

    @requires(Role.ADMIN)
    async def DeleteAction(
        self, request: pb.DeleteActionRequest, context: Context
    ) -> pb.DeleteActionResponse:
        await self._catalog.delete(current_principal(), request.action)
        return pb.DeleteActionResponse()

    @requires(Role.DEVELOPER)
    async def SimulateAction(
        self, request: pb.SimulateActionRequest, context: Context
    ) -> pb.SimulateActionResponse:
        version, result = await self._catalog.simulate(
            current_principal(),
            request.action,
            request.version,
            request.payload_json,
            dict(request.secrets),
        )
        return pb.SimulateActionResponse(version=version, result=simulation_proto(result))


async def _read_upload(
    requests: AsyncIterator[pb.UploadActionVersionRequest],
) -> tuple[UploadHeader, bytes]:
    """The header first, then chunks; stops reading as soon as the module is too big."""
    header: pb.UploadHeader | None = None
    chunks: list[bytes] = []
    size = 0
    async for part in requests:
        if part.WhichOneof("part") == "header":
            if header is not None:
                raise invalid_field("header", "must be sent once, in the first message")
            header = part.header
        elif header is None:
            raise invalid_field("header", "must come first, before any module chunk")
        else:
            size += len(part.chunk)
            if size > MAX_MODULE_BYTES:
                raise errors.module_invalid(f"the module is larger than {MAX_MODULE_BYTES} bytes")
            chunks.append(part.chunk)
    if header is None:
        raise invalid_field("header", "is required")
    return (
        UploadHeader(header.name, header.description, header.permissions, header.signature),
        b"".join(chunks),
    )
