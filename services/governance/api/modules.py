"""ModuleService: module bytes by digest, for the executor only."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from eventflow.governance.v1 import module_service_pb2 as pb
from eventflow.governance.v1 import module_service_pb2_grpc as pb_grpc

from libs.auth import requires_service
from libs.errors import not_found
from services.governance.storage.actions import ActionStore

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class ModuleServicer(pb_grpc.ModuleServiceServicer):
    def __init__(self, store: ActionStore) -> None:
        self._store = store

    @requires_service("executor")
    async def GetModule(
        self, request: pb.GetModuleRequest, context: Context
    ) -> pb.GetModuleResponse:
        async with self._store.transaction() as conn:
            wasm = await self._store.module_by_digest(conn, request.organization_id, request.sha256)
        if wasm is None:
            raise not_found("module", request.sha256)
        return pb.GetModuleResponse(wasm=wasm)
