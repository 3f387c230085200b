"""SecretResolverService: the one method that returns values, for the executor only."""

from __future__ import annotations

import logging
from typing import Any, TypeAlias

import grpc
from eventflow.vault.v1 import resolver_service_pb2 as pb
from eventflow.vault.v1 import resolver_service_pb2_grpc as pb_grpc

from libs.auth import current_principal, requires_service
from libs.errors import EventflowError
from services.vault.audit import AuditTrail
from services.vault.domain.audit import PLATFORM, AuditEntry, Operation, Outcome
from services.vault.secrets import SecretVault

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]

log = logging.getLogger("eventflow.vault")


class ResolverServicer(pb_grpc.SecretResolverServiceServicer):
    def __init__(self, vault: SecretVault, audit: AuditTrail) -> None:
        self._vault = vault
        self._audit = audit

    async def Resolve(self, request: pb.ResolveRequest, context: Context) -> pb.ResolveResponse:
        try:
            return await self._resolve(request, context)
        except EventflowError as error:
            if error.code == grpc.StatusCode.PERMISSION_DENIED:
                await self._record_refusal(request)
            raise

    @requires_service("executor")
    async def _resolve(self, request: pb.ResolveRequest, context: Context) -> pb.ResolveResponse:
        resolved = await self._vault.resolve(
            current_principal(),
            request.organization_id,
            request.action,
            list(request.keys),
            request.purpose,
        )
        return pb.ResolveResponse(
            secrets=[
                pb.ResolvedSecret(key=r.key, value=r.value.reveal(), version=r.version)
                for r in resolved
            ]
        )

    async def _record_refusal(self, request: pb.ResolveRequest) -> None:
        """A refused Resolve is a platform entry: the caller may not write into the
        audit log of the organization it names."""
        try:
            caller = current_principal().key_id
        except EventflowError:
            caller = "unauthenticated"
        log.warning("vault: Resolve refused for caller %s", caller)
        await self._audit.record(
            AuditEntry(
                PLATFORM,
                Operation.RESOLVE,
                caller,
                Outcome.DENIED,
                detail=f"asked for {len(request.keys)} key(s) of organization"
                f" {request.organization_id[:100]!r}",
            )
        )
