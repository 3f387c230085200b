"""Fixtures for governance: stubs and an upload helper over the real stack."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import pytest
from eventflow.governance.v1 import action_service_pb2 as api
from eventflow.governance.v1 import action_service_pb2_grpc as api_grpc

from tests.conftest import Tenant, make_tenant

CHUNK = 1024 * 1024


@dataclass
class ActionsClient:
    tenant: Tenant

    @property
    def stub(self) -> api_grpc.ActionServiceStub:
        return api_grpc.ActionServiceStub(self.tenant.channel)

    def md(self, role: str) -> tuple[tuple[str, str], ...]:
        return self.tenant.metadata(role)

    async def upload(
        self,
        name: str,
        module: bytes,
        *,
        role: str = "developer",
        permissions: str = "",
        signature: str = "",
        description: str = "",
    ) -> api.UploadActionVersionResponse:
        async def parts() -> AsyncIterator[api.UploadActionVersionRequest]:
            yield api.UploadActionVersionRequest(
                header=api.UploadHeader(
                    name=name,
                    description=description,
                    permissions=permissions,
                    signature=signature,
                )
            )
            for start in range(0, len(module), CHUNK):
                yield api.UploadActionVersionRequest(chunk=module[start : start + CHUNK])

        return await self.stub.UploadActionVersion(parts(), metadata=self.md(role))

    async def review(
        self, name: str, version: int, decision: str = "approved", role: str = "admin"
    ) -> api.ReviewActionVersionResponse:
        return await self.stub.ReviewActionVersion(
            api.ReviewActionVersionRequest(
                action=name, version=version, decision=decision, comment="looks good"
            ),
            metadata=self.md(role),
        )


@pytest.fixture
async def actions(channel: grpc.aio.Channel, operator_token: str) -> ActionsClient:
    return ActionsClient(await make_tenant(channel, operator_token))
