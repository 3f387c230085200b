"""The executor's calls to governance's internal ModuleService, over mutual TLS."""

from __future__ import annotations

from eventflow.governance.v1 import module_service_pb2 as pb
from eventflow.governance.v1 import module_service_pb2_grpc as pb_grpc

from libs.identity import ServiceCertificates
from libs.internal_channel import InternalChannel


class ModuleClient:
    def __init__(self, target: str, certificates: ServiceCertificates) -> None:
        self._channel = InternalChannel(target, certificates, "governance")

    async def get_module(self, organization_id: str, sha256: str) -> bytes:
        stub = pb_grpc.ModuleServiceStub(self._channel.get())
        response = await stub.GetModule(
            pb.GetModuleRequest(organization_id=organization_id, sha256=sha256), timeout=30
        )
        return response.wasm

    async def close(self) -> None:
        await self._channel.close()
