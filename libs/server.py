"""Builds a gRPC server with what every eventflow server has.

Interceptors, outermost first: tracing, error mapping, authentication.
Health checking and reflection are registered for every service added.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from libs.auth import AuthInterceptor, KeyStore
from libs.grpcutil import ErrorInterceptor
from libs.identity import ServiceCertificates
from libs.telemetry import server_interceptor


@dataclass(frozen=True)
class ServiceBinding:
    """A servicer and the generated function that registers it."""

    full_name: str
    servicer: Any
    add_to_server: Callable[[Any, grpc.aio.Server], None]


@dataclass
class RunningServer:
    server: grpc.aio.Server
    health: health.aio.HealthServicer
    port: int
    # The mutual-TLS listener for service-to-service calls (0: none).
    internal_port: int = 0

    async def stop(self, grace: float = 5.0) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)


async def start_server(
    bindings: Sequence[ServiceBinding],
    *,
    listen: str,
    keys: KeyStore,
    operator_token: str = "",
    internal_listen: str = "",
    certificates: ServiceCertificates | None = None,
) -> RunningServer:
    """Serve ``bindings`` on ``listen`` and, with certificates, on an mTLS ``internal_listen``."""
    server = grpc.aio.server(
        interceptors=[
            server_interceptor(),
            ErrorInterceptor(),
            AuthInterceptor(keys, operator_token),
        ],
        options=[("grpc.max_receive_message_length", 16 * 1024 * 1024)],
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for binding in bindings:
        binding.add_to_server(binding.servicer, server)
    names = [b.full_name for b in bindings]
    reflection.enable_server_reflection(
        [*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server
    )
    port = server.add_insecure_port(listen)
    if port == 0:
        raise OSError(f"cannot bind gRPC server to {listen}")
    internal_port = 0
    if internal_listen and certificates is not None:
        internal_port = server.add_secure_port(internal_listen, certificates.server_credentials())
        if internal_port == 0:
            raise OSError(f"cannot bind the internal gRPC listener to {internal_listen}")
    await server.start()
    for name in ["", *names]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return RunningServer(server, health_servicer, port, internal_port)
