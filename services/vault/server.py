"""Assembles the vault from its parts; used by `eventflow serve vault` and the dev stack.

Serve its bindings with ``internal_listen`` and the vault's certificates:
Resolve answers the executor's certificate on that mutual-TLS listener only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from eventflow.vault.v1 import (
    audit_service_pb2_grpc,
    key_ring_service_pb2_grpc,
    resolver_service_pb2_grpc,
    secret_service_pb2_grpc,
)
from psycopg_pool import AsyncConnectionPool

from libs.db import load_migrations
from libs.server import ServiceBinding
from services.vault.api.audit import AuditServicer
from services.vault.api.key_ring import KeyRingServicer
from services.vault.api.resolver import ResolverServicer
from services.vault.api.secrets import SecretServicer
from services.vault.audit import AuditTrail
from services.vault.domain.key_ring import KeyRing, KeyRingError
from services.vault.rotation import REWRAP_BATCH, KeyRotation
from services.vault.secrets import CurrentKeyRing, SecretVault
from services.vault.storage.audit import AuditStore
from services.vault.storage.secrets import SecretStore

SCHEMA = "vault"
MIGRATIONS = load_migrations(Path(__file__).parent / "storage" / "migrations")

log = logging.getLogger("eventflow.vault")


@dataclass
class Vault:
    bindings: list[ServiceBinding]
    secrets: SecretVault
    rotation: KeyRotation
    audit: AuditTrail
    keys: CurrentKeyRing
    store: SecretStore

    async def start(self) -> None:
        await self._check(self.keys.ring)

    async def stop(self) -> None:
        pass

    async def reload_keyring(self, ring: KeyRing) -> None:
        """Swap in a new key ring (after `keyring rotate`) without a restart."""
        await self._check(ring)
        self.keys.ring = ring

    async def _check(self, ring: KeyRing) -> None:
        """Refuse a ring whose primary was retired; warn about keys rows need but lack."""
        async with self.store.transaction() as conn:
            usage = await self.store.usage_by_key_version(conn)
            retired = await self.store.retired_versions(conn)
        primary = ring.primary
        if primary.version in retired:
            raise KeyRingError(
                f"vault key version {primary.version} was retired; configure a newer key"
            )
        for version, count in sorted(usage.items()):
            if ring.get(version) is None:
                log.error(
                    "vault: %d secret version(s) are wrapped by key version %d, which the key"
                    " ring lacks; they cannot be resolved until it is restored",
                    count,
                    version,
                )
        log.info(
            "vault key ring: versions %s, primary %d (fingerprint %s)",
            ring.versions,
            primary.version,
            primary.fingerprint,
        )


def build_vault(
    pool: AsyncConnectionPool, keyring: KeyRing, rewrap_batch: int = REWRAP_BATCH
) -> Vault:
    store, audit_store = SecretStore(pool), AuditStore()
    keys = CurrentKeyRing(keyring)
    secrets = SecretVault(store, audit_store, keys)
    rotation = KeyRotation(store, audit_store, keys, rewrap_batch)
    audit = AuditTrail(store, audit_store)
    bindings = [
        ServiceBinding(
            "eventflow.vault.v1.SecretService",
            SecretServicer(secrets),
            secret_service_pb2_grpc.add_SecretServiceServicer_to_server,
        ),
        ServiceBinding(
            "eventflow.vault.v1.SecretResolverService",
            ResolverServicer(secrets, audit),
            resolver_service_pb2_grpc.add_SecretResolverServiceServicer_to_server,
        ),
        ServiceBinding(
            "eventflow.vault.v1.KeyRingService",
            KeyRingServicer(rotation),
            key_ring_service_pb2_grpc.add_KeyRingServiceServicer_to_server,
        ),
        ServiceBinding(
            "eventflow.vault.v1.AuditService",
            AuditServicer(audit),
            audit_service_pb2_grpc.add_AuditServiceServicer_to_server,
        ),
    ]
    return Vault(bindings, secrets, rotation, audit, keys, store)
