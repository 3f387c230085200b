"""API keys for services that do not own them: looked up in the registry.

Lookups are cached briefly (positive and negative), so a revocation takes
effect within ``ttl_s`` everywhere; the registry itself sees it at once.
"""

from __future__ import annotations

import time

import grpc
from eventflow.registry.v1 import key_lookup_service_pb2 as pb
from eventflow.registry.v1 import key_lookup_service_pb2_grpc as pb_grpc

from libs.auth import KeyRecord, Role
from libs.identity import ServiceCertificates

DEFAULT_TTL_S = 10.0


class RemoteKeyStore:
    def __init__(
        self, target: str, certificates: ServiceCertificates, ttl_s: float = DEFAULT_TTL_S
    ) -> None:
        self._target = target
        self._certificates = certificates
        self._ttl = ttl_s
        self._cache: dict[str, tuple[float, KeyRecord | None]] = {}
        self._channel: grpc.aio.Channel | None = None

    async def find_key(self, key_id: str) -> KeyRecord | None:
        cached = self._cache.get(key_id)
        if cached is not None and time.monotonic() - cached[0] < self._ttl:
            return cached[1]
        record = await self._lookup(key_id)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[key_id] = (time.monotonic(), record)
        return record

    async def _lookup(self, key_id: str) -> KeyRecord | None:
        if self._channel is None:
            self._channel = grpc.aio.secure_channel(
                self._target,
                self._certificates.channel_credentials(),
                options=[("grpc.ssl_target_name_override", "registry")],
            )
        stub = pb_grpc.ApiKeyLookupServiceStub(self._channel)
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
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
