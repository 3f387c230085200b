"""Service identity: the internal listener admits only certificates from the
eventflow CA, and `requires_service` answers only the services it names."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from libs.auth import Principal, Role, current_principal, requires, requires_service
from libs.errors import read_error
from libs.identity import ServiceCertificates, create_dev_pki
from libs.server import RunningServer, ServiceBinding, start_server
from tests.conftest import bearer

SECRET_METHOD = "/test.Internal/WhoAmI"
TENANT_METHOD = "/test.Internal/TenantRead"


class Internal:
    @requires_service("executor")
    async def who_am_i(self, request: bytes, context: Any) -> bytes:
        return (current_principal().service or "").encode()

    @requires(Role.VIEWER)
    async def tenant_read(self, request: bytes, context: Any) -> bytes:
        return b"tenant data"


def add_internal(servicer: Internal, server: grpc.aio.Server) -> None:
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "test.Internal",
                {
                    "WhoAmI": grpc.unary_unary_rpc_method_handler(servicer.who_am_i),
                    "TenantRead": grpc.unary_unary_rpc_method_handler(servicer.tenant_read),
                },
            )
        ]
    )


class NoKeys:
    async def find_key(self, key_id: str) -> None:
        return None


@dataclass
class Listener:
    server: RunningServer
    pki: Path

    def channel(self, service: str | None, pki: Path | None = None) -> grpc.aio.Channel:
        address = f"127.0.0.1:{self.server.internal_port}"
        if service is None:
            ca = (self.pki / "ca.pem").read_bytes()
            return grpc.aio.secure_channel(address, grpc.ssl_channel_credentials(ca))
        certs = ServiceCertificates.load(pki or self.pki, service)
        if pki is not None:  # trust our CA, present the foreign certificate
            certs = ServiceCertificates(
                service, (self.pki / "ca.pem").read_bytes(), certs.cert_pem, certs.key_pem
            )
        return grpc.aio.secure_channel(address, certs.channel_credentials())


@pytest.fixture
async def listener(tmp_path: Path) -> AsyncIterator[Listener]:
    pki = create_dev_pki(tmp_path / "pki")
    server = await start_server(
        [ServiceBinding("test.Internal", Internal(), add_internal)],
        listen="127.0.0.1:0",
        keys=NoKeys(),
        operator_token="operator",
        internal_listen="127.0.0.1:0",
        certificates=ServiceCertificates.load(pki, "vault"),
    )
    yield Listener(server, pki)
    await server.stop(0)


async def call(channel: grpc.aio.Channel, method: str, **kw: Any) -> bytes:
    async with channel:
        result: bytes = await channel.unary_unary(method)(b"", timeout=5, **kw)
        return result


async def test_the_named_service_is_answered(listener: Listener) -> None:
    assert await call(listener.channel("executor"), SECRET_METHOD) == b"executor"


async def test_another_service_is_refused(listener: Listener) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(listener.channel("orchestrator"), SECRET_METHOD)
    error = read_error(caught.value)
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "SERVICE_ONLY")


async def test_even_the_operator_token_is_refused_on_the_public_port(listener: Listener) -> None:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{listener.server.port}")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(channel, SECRET_METHOD, metadata=bearer("operator"))
    assert read_error(caught.value).reason == "SERVICE_ONLY"


async def test_a_client_without_a_certificate_cannot_connect(listener: Listener) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(listener.channel(None), SECRET_METHOD)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_a_certificate_from_another_ca_cannot_connect(
    listener: Listener, tmp_path: Path
) -> None:
    foreign = create_dev_pki(tmp_path / "foreign")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(listener.channel("executor", pki=foreign), SECRET_METHOD)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_a_service_identity_does_not_open_tenant_methods(listener: Listener) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(listener.channel("executor"), TENANT_METHOD)
    assert read_error(caught.value).reason == "SERVICE_NOT_ALLOWED"


def test_dev_pki_is_kept_across_calls_and_keys_are_private(tmp_path: Path) -> None:
    first = create_dev_pki(tmp_path / "pki")
    ca = (first / "ca.pem").read_bytes()
    create_dev_pki(tmp_path / "pki")
    assert (first / "ca.pem").read_bytes() == ca
    assert oct((first / "executor.key").stat().st_mode & 0o777) == "0o600"


def test_the_principal_of_a_service_has_no_tenant() -> None:
    principal = Principal.of_service("executor")
    assert principal.organization_id is None and principal.service == "executor"
