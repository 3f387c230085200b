"""API keys for services that do not own them: looked up in the registry.

Lookups are cached briefly (positive and negative), so a revocation takes
effect within ``ttl_s`` everywhere; the registry itself sees it at once.
"""

from __future__ import annotations

from eventflow.registry.v1 import key_lookup_service_pb2 as pb
from eventflow.registry.v1 import key_lookup_service_pb2_grpc as pb_grpc

from libs.auth import KeyRecord, Role
from libs.identity import ServiceCertificates
from libs.internal_channel import InternalChannel
from libs.ttl_cache import TtlCache

DEFAULT_TTL_S = 10.0


class RemoteKeyStore:
    def __init__(
        self, target: str, certificates: ServiceCertificates, ttl_s: float = DEFAULT_TTL_S
    ) -> None:
        self._channel = InternalChannel(target, certificates, "registry")
        self._cache: TtlCache[KeyRecord | None] = TtlCache(ttl_s)

    async def find_key(self, key_id: str) -> KeyRecord | None:
        hit, cached = self._cache.get(key_id)
        if hit:
            return cached
        record = await self._lookup(key_id)
        self._cache.put(key_id, record)
        return record

    async def _lookup(self, key_id: str) -> KeyRecord | None:
        stub = pb_grpc.ApiKeyLookupServiceStub(self._channel.get())
        found = await stub.LookupApiKey(pb.LookupApiKeyRequest(key_id=key_id), timeout=5)
        if not found.found:
            return None
        return KeyRecord(
            key_id=key_id,
            organization_id=found.organization_id,
            project_id=found.project_id or None,
            role=Role.parse(found.role),
            secret_hash=found.secret_hash,
            revoked=found.revoked,
        )

    async def close(self) -> None:
        await self._channel.close()
