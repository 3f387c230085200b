"""ApiKeyLookupService: API key records for the other services' interceptors."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from eventflow.registry.v1 import key_lookup_service_pb2 as pb
from eventflow.registry.v1 import key_lookup_service_pb2_grpc as pb_grpc

from libs.auth import requires_service
from services.registry.storage.tenancy import TenancyStore

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class ApiKeyLookupServicer(pb_grpc.ApiKeyLookupServiceServicer):
    def __init__(self, keys: TenancyStore) -> None:
        self._keys = keys

    @requires_service("governance", "vault", "executor", "orchestrator")
    async def LookupApiKey(
        self, request: pb.LookupApiKeyRequest, context: Context
    ) -> pb.LookupApiKeyResponse:
        record = await self._keys.find_key(request.key_id)
        if record is None:
            return pb.LookupApiKeyResponse(found=False)
        return pb.LookupApiKeyResponse(
            found=True,
            organization_id=record.organization_id,
            project_id=record.project_id or "",
            role=record.role.label,
            secret_hash=record.secret_hash,
            revoked=record.revoked,
        )
