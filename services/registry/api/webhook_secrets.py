"""WebhookSecretService: a workflow's signing secrets for the orchestrator's deliveries."""

from __future__ import annotations

from typing import Any, TypeAlias

import grpc
from eventflow.registry.v1 import webhook_secret_service_pb2 as pb
from eventflow.registry.v1 import webhook_secret_service_pb2_grpc as pb_grpc

from libs.auth import requires_service
from services.registry.workflows import WorkflowCatalog

Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]


class WebhookSecretServicer(pb_grpc.WebhookSecretServiceServicer):
    def __init__(self, catalog: WorkflowCatalog) -> None:
        self._catalog = catalog

    @requires_service("orchestrator")
    async def GetWebhookSigningSecrets(
        self, request: pb.GetWebhookSigningSecretsRequest, context: Context
    ) -> pb.GetWebhookSigningSecretsResponse:
        current, *previous = await self._catalog.signing_secrets(request.workflow_id)
        return pb.GetWebhookSigningSecretsResponse(
            secret=current, previous_secret=previous[0] if previous else ""
        )
