"""Webhook signing secrets for the orchestrator: looked up in the registry.

Lookups are cached briefly (per workflow), so a rotation reaches
deliveries within ``ttl_s``: until then they are signed as before the
rotation, and a receiver that switched to the new secret at once may reject
them for that long. Failures are not cached; the next delivery asks again.
"""

from __future__ import annotations

import time

import grpc
from eventflow.registry.v1 import webhook_secret_service_pb2 as pb
from eventflow.registry.v1 import webhook_secret_service_pb2_grpc as pb_grpc

from libs.identity import ServiceCertificates

DEFAULT_TTL_S = 10.0
MAX_CACHED = 10_000


class WebhookSecrets:
    def __init__(
        self, target: str, certificates: ServiceCertificates, ttl_s: float = DEFAULT_TTL_S
    ) -> None:
        self._target = target
        self._certificates = certificates
        self._ttl = ttl_s
        self._cache: dict[str, tuple[float, list[str]]] = {}
        self._channel: grpc.aio.Channel | None = None

    async def for_workflow(self, workflow_id: str) -> list[str]:
        """The secrets to sign a delivery with: the current one first, then the previous one."""
        cached = self._cache.get(workflow_id)
        if cached is not None and time.monotonic() - cached[0] < self._ttl:
            return list(cached[1])
        found = await self._lookup(workflow_id)
        if len(self._cache) >= MAX_CACHED:
            self._cache.clear()
        self._cache[workflow_id] = (time.monotonic(), found)
        return list(found)

    async def _lookup(self, workflow_id: str) -> list[str]:
        if self._channel is None:
            self._channel = grpc.aio.secure_channel(
                self._target,
                self._certificates.channel_credentials(),
                # Only a certificate naming the registry may answer.
                options=[("grpc.ssl_target_name_override", "registry")],
            )
        stub = pb_grpc.WebhookSecretServiceStub(self._channel)
        response = await stub.GetWebhookSigningSecrets(
            pb.GetWebhookSigningSecretsRequest(workflow_id=workflow_id), timeout=5
        )
        return [s for s in (response.secret, response.previous_secret) if s]

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
