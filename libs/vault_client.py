"""The executor's way to read secrets: the vault's Resolve, over mutual TLS.

The executor depends on ``SecretSource``, not on this client, so its tests
can hand it a dictionary; ``VaultClient`` is the real source. The client
checks the server's certificate names the vault (``server_name``), so
another service's certificate from the same CA cannot pose as it.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol

import grpc
from eventflow.vault.v1 import resolver_service_pb2 as pb
from eventflow.vault.v1 import resolver_service_pb2_grpc as pb_grpc
from opentelemetry.instrumentation.grpc import aio_client_interceptors

from libs.errors import read_error
from libs.identity import ServiceCertificates

DEFAULT_TIMEOUT_SECONDS = 5.0


class SecretSource(Protocol):
    async def secrets_for(self, organization: str, action: str, keys: list[str]) -> dict[str, str]:
        """The stored values among ``keys``; a key that is not stored is absent."""
        ...


class VaultError(Exception):
    """The vault refused or failed a Resolve. Its message never holds a value."""

    def __init__(self, code: grpc.StatusCode, reason: str, message: str) -> None:
        super().__init__(f"vault {code.name} {reason}: {message}")
        self.code = code
        self.reason = reason


class VaultClient:
    def __init__(
        self,
        target: str,
        certificates: ServiceCertificates,
        *,
        server_name: str = "vault",
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self._target = target
        self._certificates = certificates
        self._server_name = server_name
        self._timeout = timeout
        self._channel: grpc.aio.Channel | None = None

    async def resolve(
        self, organization: str, action: str, keys: list[str], purpose: str = ""
    ) -> dict[str, str]:
        """``{key: value}`` for the stored keys among ``keys``; no call for no keys."""
        if not keys:
            return {}
        stub = pb_grpc.SecretResolverServiceStub(self._open())
        request = pb.ResolveRequest(
            organization_id=organization, action=action, keys=keys, purpose=purpose
        )
        try:
            response = await stub.Resolve(request, timeout=self._timeout)
        except grpc.aio.AioRpcError as error:
            details = read_error(error)
            raise VaultError(details.code, details.reason, details.message) from None
        return {secret.key: secret.value for secret in response.secrets}

    async def secrets_for(self, organization: str, action: str, keys: list[str]) -> dict[str, str]:
        return await self.resolve(organization, action, keys)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    async def __aenter__(self) -> VaultClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def _open(self) -> grpc.aio.Channel:
        if self._channel is None:
            options = [("grpc.ssl_target_name_override", self._server_name)]
            self._channel = grpc.aio.secure_channel(
                self._target,
                self._certificates.channel_credentials(),
                options=options if self._server_name else None,
                # Carries the trace context, so a resolve joins the executor's trace.
                interceptors=aio_client_interceptors(),
            )
        return self._channel
