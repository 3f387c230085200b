"""Production shape: a service in its own process authenticates API keys
against the registry and calls its peers, all over mutual TLS."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from eventflow.governance.v1 import action_service_pb2 as api
from eventflow.governance.v1 import action_service_pb2_grpc as api_grpc
from eventflow.registry.v1 import tenancy_service_pb2 as tn

from cli.stack import Stack
from libs.bus import InProcessBus
from tests.conftest import Tenant, bearer, create_database
from tests.governance.modules import ECHO, wasm
from tests.integration.helpers import rpc_error


@pytest.fixture
async def governance_alone(stack: Stack, postgres_server: str) -> AsyncIterator[Stack]:
    settings = dataclasses.replace(
        stack.settings,
        database_url=create_database(postgres_server),
        grpc_listen="127.0.0.1:0",
        internal_listen="127.0.0.1:0",
        registry_address=stack.internal_address,
        executor_address=stack.internal_address,
    )
    alone = await Stack.start(settings, services=("governance",), bus=InProcessBus())
    yield alone
    await alone.stop()


async def test_a_separate_governance_accepts_registry_keys_and_validates_on_the_executor(
    tenant: Tenant, governance_alone: Stack
) -> None:
    async with grpc.aio.insecure_channel(governance_alone.address) as channel:
        stub = api_grpc.ActionServiceStub(channel)

        async def parts() -> AsyncIterator[api.UploadActionVersionRequest]:
            yield api.UploadActionVersionRequest(header=api.UploadHeader(name="echo"))
            yield api.UploadActionVersionRequest(chunk=wasm(ECHO))

        uploaded = await stub.UploadActionVersion(parts(), metadata=tenant.metadata("developer"))
        assert uploaded.version.version == 1
        listed = await stub.ListActions(
            api.ListActionsRequest(), metadata=tenant.metadata("viewer")
        )
        assert [a.name for a in listed.actions] == ["echo"]

        error = await rpc_error(
            stub.ListActions(
                api.ListActionsRequest(), metadata=bearer("efk_unknownkey12_" + "A" * 43)
            )
        )
        assert error.code == grpc.StatusCode.UNAUTHENTICATED

        created = await tenant.tenancy.CreateApiKey(
            tn.CreateApiKeyRequest(role="viewer"), metadata=tenant.metadata("admin")
        )
        await tenant.tenancy.RevokeApiKey(
            tn.RevokeApiKeyRequest(id=created.api_key.id), metadata=tenant.metadata("admin")
        )
        error = await rpc_error(
            stub.ListActions(api.ListActionsRequest(), metadata=bearer(created.secret))
        )
        assert error.code == grpc.StatusCode.UNAUTHENTICATED


async def test_key_lookups_answer_services_only(tenant: Tenant, stack: Stack, pki: Path) -> None:
    from eventflow.registry.v1 import key_lookup_service_pb2 as kl
    from eventflow.registry.v1 import key_lookup_service_pb2_grpc as kl_grpc

    stub = kl_grpc.ApiKeyLookupServiceStub(tenant.channel)
    key_id = tenant.keys["admin"].split("_")[1]
    error = await rpc_error(
        stub.LookupApiKey(kl.LookupApiKeyRequest(key_id=key_id), metadata=tenant.metadata("admin"))
    )
    assert error.reason == "SERVICE_ONLY"
