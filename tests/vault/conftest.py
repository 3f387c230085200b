"""Vault fixtures: the vault served over real gRPC on its own PostgreSQL database.

API keys come from the registry of the shared ``stack`` (so real,
registry-issued keys authenticate), and the executor reaches Resolve over the
mutual-TLS internal listener with a certificate from a dev PKI. Most tests
share one vault and isolate themselves by organization; key ring tests, which
change every row, get a vault and database of their own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import psycopg
import pytest
from eventflow.vault.v1 import audit_service_pb2_grpc as audit_grpc
from eventflow.vault.v1 import key_ring_service_pb2_grpc as key_ring_grpc
from eventflow.vault.v1 import resolver_service_pb2_grpc as resolver_grpc
from eventflow.vault.v1 import secret_service_pb2_grpc as secret_grpc
from psycopg_pool import AsyncConnectionPool

from cli.stack import Stack
from libs.auth import KeyStore
from libs.db import apply_migrations, open_pool
from libs.identity import ServiceCertificates, create_dev_pki
from libs.server import RunningServer, start_server
from libs.vault_client import VaultClient
from services.vault.domain.key_ring import KeyEncryptionKey, KeyRing
from services.vault.server import MIGRATIONS, SCHEMA, Vault, build_vault
from tests.conftest import Tenant, bearer, create_database, make_tenant

Metadata = tuple[tuple[str, str], ...]


def ring_of(*versions: int) -> KeyRing:
    return KeyRing(KeyEncryptionKey.generate(v) for v in versions)


@dataclass
class VaultServer:
    vault: Vault
    server: RunningServer
    pool: AsyncConnectionPool
    database_url: str
    pki: Path
    public: grpc.aio.Channel

    @property
    def internal_address(self) -> str:
        return f"127.0.0.1:{self.server.internal_port}"

    def service_channel(self, service: str) -> grpc.aio.Channel:
        """A channel presenting ``service``'s certificate to the internal listener."""
        certificates = ServiceCertificates.load(self.pki, service)
        return grpc.aio.secure_channel(
            self.internal_address,
            certificates.channel_credentials(),
            options=[("grpc.ssl_target_name_override", "vault")],
        )

    def client(self, service: str = "executor") -> VaultClient:
        return VaultClient(self.internal_address, ServiceCertificates.load(self.pki, service))

    @property
    def secrets(self) -> secret_grpc.SecretServiceStub:
        return secret_grpc.SecretServiceStub(self.public)

    @property
    def key_ring(self) -> key_ring_grpc.KeyRingServiceStub:
        return key_ring_grpc.KeyRingServiceStub(self.public)

    @property
    def audit(self) -> audit_grpc.AuditServiceStub:
        return audit_grpc.AuditServiceStub(self.public)

    @property
    def public_resolver(self) -> resolver_grpc.SecretResolverServiceStub:
        return resolver_grpc.SecretResolverServiceStub(self.public)

    async def sql(self, query: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        """Direct database access, to tamper with rows as an attacker would."""
        async with await psycopg.AsyncConnection.connect(self.database_url) as conn:
            cur = await conn.execute(query.encode(), params)
            rows = await cur.fetchall() if cur.description else []
            await conn.commit()
            return rows

    async def stop(self) -> None:
        await self.public.close()
        await self.server.stop(0)
        await self.vault.stop()
        await self.pool.close()


async def start_vault(
    postgres_server: str, keys: KeyStore, operator_token: str, pki: Path, ring: KeyRing
) -> VaultServer:
    url = create_database(postgres_server)
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await apply_migrations(conn, SCHEMA, MIGRATIONS)
    pool = await open_pool(url, max_size=8, name="vault-test")
    vault = build_vault(pool, ring, rewrap_batch=7)
    await vault.start()
    server = await start_server(
        vault.bindings,
        listen="127.0.0.1:0",
        keys=keys,
        operator_token=operator_token,
        internal_listen="127.0.0.1:0",
        certificates=ServiceCertificates.load(pki, "vault"),
    )
    public = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
    return VaultServer(vault, server, pool, url, pki, public)


def registry_keys(stack: Stack) -> KeyStore:
    """The registry's API keys: real, registry-issued keys authenticate."""
    assert stack.registry is not None
    return stack.registry.keys


@pytest.fixture(scope="session")
def vault_pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return create_dev_pki(tmp_path_factory.mktemp("vault-pki"))


@pytest.fixture(scope="session")
async def vault(
    stack: Stack, postgres_server: str, operator_token: str, vault_pki: Path
) -> AsyncIterator[VaultServer]:
    """One vault for the session; tests isolate themselves by organization."""
    running = await start_vault(
        postgres_server, registry_keys(stack), operator_token, vault_pki, ring_of(1)
    )
    yield running
    await running.stop()


@pytest.fixture
async def own_vault(
    stack: Stack, postgres_server: str, operator_token: str, vault_pki: Path
) -> AsyncIterator[VaultServer]:
    """A vault with a database of its own (key ring operations span every tenant)."""
    running = await start_vault(
        postgres_server, registry_keys(stack), operator_token, vault_pki, ring_of(1)
    )
    yield running
    await running.stop()


@pytest.fixture(scope="session")
async def executor_channel(vault: VaultServer) -> AsyncIterator[grpc.aio.Channel]:
    channel = vault.service_channel("executor")
    yield channel
    await channel.close()


@pytest.fixture(scope="session")
def resolver(executor_channel: grpc.aio.Channel) -> resolver_grpc.SecretResolverServiceStub:
    """Resolve as the executor: its certificate, the internal listener."""
    return resolver_grpc.SecretResolverServiceStub(executor_channel)


@pytest.fixture
async def other_tenant(channel: grpc.aio.Channel, operator_token: str) -> Tenant:
    return await make_tenant(channel, operator_token)


@pytest.fixture
def operator(operator_token: str) -> Metadata:
    return bearer(operator_token)
