"""A lazily opened mutual-TLS channel to one service's internal listener.

Opened on first use, inside the event loop that will drive it, and pinned
to the name of the service it expects: another service's certificate from
the same CA cannot answer in its place. Every call is a client span and
carries the caller's trace context in its metadata.
"""

from __future__ import annotations

import grpc

from libs.identity import ServiceCertificates
from libs.telemetry import client_interceptors

MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class InternalChannel:
    def __init__(self, target: str, certificates: ServiceCertificates, service: str) -> None:
        self._target = target
        self._certificates = certificates
        self._service = service
        self._channel: grpc.aio.Channel | None = None

    def get(self) -> grpc.aio.Channel:
        if self._channel is None:
            self._channel = grpc.aio.secure_channel(
                self._target,
                self._certificates.channel_credentials(),
                options=[
                    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                    ("grpc.ssl_target_name_override", self._service),
                ],
                interceptors=client_interceptors(),
            )
        return self._channel

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
