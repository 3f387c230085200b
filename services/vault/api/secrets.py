"""SecretService: protobuf in, use case, protobuf out. The value is wrapped on arrival."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from eventflow.vault.v1 import secret_service_pb2 as pb
from eventflow.vault.v1 import secret_service_pb2_grpc as pb_grpc

from libs.auth import Role, current_principal, requires
from services.vault.api.convert import secret_proto, version_proto
from services.vault.domain.values import SecretValue
from services.vault.secrets import SecretVault

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class SecretServicer(pb_grpc.SecretServiceServicer):
    def __init__(self, vault: SecretVault) -> None:
        self._vault = vault

    @requires(Role.DEVELOPER)
    async def SetSecret(
        self, request: pb.SetSecretRequest, context: Context
    ) -> pb.SetSecretResponse:
        row = await self._vault.set_secret(
            current_principal(),
            request.organization_id,
            request.action,
            request.key,
            SecretValue(request.value),
        )
        return pb.SetSecretResponse(secret=secret_proto(row))

    @requires(Role.VIEWER)
    async def ListSecrets(
        self, request: pb.ListSecretsRequest, context: Context
    ) -> pb.ListSecretsResponse:
        rows, token = await self._vault.list_secrets(
            current_principal(),
            request.organization_id,
            request.action,
            request.page_size,
            request.page_token,
        )
        return pb.ListSecretsResponse(
            secrets=[secret_proto(r) for r in rows], next_page_token=token
        )

    @requires(Role.VIEWER)
    async def ListSecretVersions(
        self, request: pb.ListSecretVersionsRequest, context: Context
    ) -> pb.ListSecretVersionsResponse:
        rows, token = await self._vault.list_versions(
            current_principal(),
            request.organization_id,
            request.action,
            request.key,
            request.page_size,
            request.page_token,
        )
        return pb.ListSecretVersionsResponse(
            versions=[version_proto(r) for r in rows], next_page_token=token
        )

    @requires(Role.DEVELOPER)
    async def DeleteSecret(
        self, request: pb.DeleteSecretRequest, context: Context
    ) -> pb.DeleteSecretResponse:
        destroyed = await self._vault.delete_secret(
            current_principal(), request.organization_id, request.action, request.key
        )
        return pb.DeleteSecretResponse(destroyed_versions=destroyed)

    @requires(Role.DEVELOPER)
    async def PurgeSecretVersions(
        self, request: pb.PurgeSecretVersionsRequest, context: Context
    ) -> pb.PurgeSecretVersionsResponse:
        destroyed, current = await self._vault.purge_versions(
            current_principal(), request.organization_id, request.action, request.key
        )
        return pb.PurgeSecretVersionsResponse(destroyed_versions=destroyed, current_version=current)
