"""AuditService: the audit log for organization admins and the operator."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from eventflow.vault.v1 import audit_service_pb2 as pb
from eventflow.vault.v1 import audit_service_pb2_grpc as pb_grpc

from libs.auth import Role, current_principal, requires
from services.vault.api.convert import audit_event_proto, operation_filter
from services.vault.audit import AuditTrail

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class AuditServicer(pb_grpc.AuditServiceServicer):
    def __init__(self, audit: AuditTrail) -> None:
        self._audit = audit

    @requires(Role.ADMIN)
    async def ListAuditEvents(
        self, request: pb.ListAuditEventsRequest, context: Context
    ) -> pb.ListAuditEventsResponse:
        filters = {
            "action": request.action,
            "key": request.key,
            "operation": operation_filter(request.operation),
        }
        rows, token = await self._audit.list_events(
            current_principal(),
            request.organization_id,
            filters,
            request.page_size,
            request.page_token,
        )
        return pb.ListAuditEventsResponse(
            events=[audit_event_proto(r) for r in rows], next_page_token=token
        )
