"""KeyRingService: the operator's view of and control over key-encryption keys."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from eventflow.vault.v1 import key_ring_service_pb2 as pb
from eventflow.vault.v1 import key_ring_service_pb2_grpc as pb_grpc

from libs.auth import Role, current_principal, requires
from services.vault.api.convert import key_version_proto
from services.vault.rotation import KeyRotation

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class KeyRingServicer(pb_grpc.KeyRingServiceServicer):
    """Every method needs the operator; ``requires(ADMIN)`` first turns away
    services and lower roles, the use case then org admins (OPERATOR_ONLY)."""

    def __init__(self, rotation: KeyRotation) -> None:
        self._rotation = rotation

    @requires(Role.ADMIN)
    async def ListKeyVersions(
        self, request: pb.ListKeyVersionsRequest, context: Context
    ) -> pb.ListKeyVersionsResponse:
        views, primary = await self._rotation.key_versions(current_principal())
        return pb.ListKeyVersionsResponse(
            key_versions=[key_version_proto(v) for v in views], primary_version=primary
        )

    @requires(Role.ADMIN)
    async def Rewrap(self, request: pb.RewrapRequest, context: Context) -> pb.RewrapResponse:
        result = await self._rotation.rewrap(current_principal())
        return pb.RewrapResponse(
            primary_version=result.primary, rewrapped=result.rewrapped, failed=result.failed
        )

    @requires(Role.ADMIN)
    async def RetireKeyVersion(
        self, request: pb.RetireKeyVersionRequest, context: Context
    ) -> pb.RetireKeyVersionResponse:
        view = await self._rotation.retire(current_principal(), request.version)
        return pb.RetireKeyVersionResponse(key_version=key_version_proto(view))
