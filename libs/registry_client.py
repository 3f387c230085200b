"""Webhook signing secrets for the orchestrator: looked up in the registry.

Lookups are cached briefly (per workflow), so a rotation reaches
deliveries within ``ttl_s``: until then they are signed as before the
rotation, and a receiver that switched to the new secret at once may reject
them for that long. Failures are not cached; the next delivery asks again.
"""

from __future__ import annotations

from eventflow.registry.v1 import webhook_secret_service_pb2 as pb
from eventflow.registry.v1 import webhook_secret_service_pb2_grpc as pb_grpc

from libs.identity import ServiceCertificates
from libs.internal_channel import InternalChannel
from libs.ttl_cache import TtlCache

DEFAULT_TTL_S = 10.0


class WebhookSecrets:
    def __init__(
        self, target: str, certificates: ServiceCertificates, ttl_s: float = DEFAULT_TTL_S
    ) -> None:
        self._channel = InternalChannel(target, certificates, "registry")
        self._cache: TtlCache[list[str]] = TtlCache(ttl_s)

    async def for_workflow(self, workflow_id: str) -> list[str]:
        """The secrets to sign a delivery with: the current one first, then the previous one."""
        hit, cached = self._cache.get(workflow_id)
        if hit and cached is not None:
            return list(cached)
        found = await self._lookup(workflow_id)
        self._cache.put(workflow_id, found)
        return list(found)

    async def _lookup(self, workflow_id: str) -> list[str]:
        stub = pb_grpc.WebhookSecretServiceStub(self._channel.get())
        response = await stub.GetWebhookSigningSecrets(
            pb.GetWebhookSigningSecretsRequest(workflow_id=workflow_id), timeout=5
        )
        return [s for s in (response.secret, response.previous_secret) if s]

    async def close(self) -> None:
        await self._channel.close()
