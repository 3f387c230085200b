"""The executor's calls to governance's internal ModuleService, over mutual TLS."""

from __future__ import annotations

import grpc
from eventflow.governance.v1 import module_service_pb2 as pb
from eventflow.governance.v1 import module_service_pb2_grpc as pb_grpc

from libs.identity import ServiceCertificates


class ModuleClient:
    def __init__(self, target: str, certificates: ServiceCertificates) -> None:
        self._target = target
        self._certificates = certificates
        self._channel: grpc.aio.Channel | None = None

    async def get_module(self, organization_id: str, sha256: str) -> bytes:
        if self._channel is None:
            self._channel = grpc.aio.secure_channel(
                self._target,
                self._certificates.channel_credentials(),
                options=[
                    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
                    # Only a certificate naming governance may answer.
                    ("grpc.ssl_target_name_override", "governance"),
                ],
            )
        stub = pb_grpc.ModuleServiceStub(self._channel)
        response = await stub.GetModule(
            pb.GetModuleRequest(organization_id=organization_id, sha256=sha256), timeout=30
        )
        return response.wasm

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None
