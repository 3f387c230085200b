"""No value ever leaks (SPEC §10): a full flow with a recognisable secret, then
a scan of every log record (DEBUG), every span, every error's message and
details, every response but Resolve's, and every stored row."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable
from typing import Any

import grpc
import pytest
from eventflow.vault.v1 import audit_service_pb2 as au
from eventflow.vault.v1 import key_ring_service_pb2 as kr
from eventflow.vault.v1 import resolver_service_pb2 as rs
from eventflow.vault.v1 import resolver_service_pb2_grpc as resolver_grpc
from eventflow.vault.v1 import secret_service_pb2 as ss
from google.protobuf.message import Message
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from libs.vault_client import VaultError
from tests.conftest import Tenant
from tests.vault.conftest import Metadata, VaultServer

ACTION = "score-order"


class Recorder:
    """Keeps every response and every error the flow produces."""

    def __init__(self) -> None:
        self.responses: list[Message] = []
        self.errors: list[grpc.aio.AioRpcError] = []

    async def ok(self, call: Awaitable[Any]) -> Any:
        response = await call
        self.responses.append(response)
        return response

    async def fails(self, call: Awaitable[Any]) -> grpc.StatusCode:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        self.errors.append(caught.value)
        return caught.value.code()


async def test_a_secret_value_appears_only_in_the_executors_resolve_answer(
    own_vault: VaultServer,
    tenant: Tenant,
    other_tenant: Tenant,
    operator: Metadata,
    spans: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    canary = f"sk_live_CANARY_{uuid.uuid4().hex}"
    newer = canary + "_v2"
    caplog.set_level(logging.DEBUG)
    vault, rec = own_vault, Recorder()
    dev, admin = tenant.metadata("developer"), tenant.metadata("admin")

    # Writes, good and bad; the value also where it does not belong.
    await rec.ok(
        vault.secrets.SetSecret(
            ss.SetSecretRequest(action=ACTION, key="API_TOKEN", value=canary), metadata=dev
        )
    )
    await rec.ok(
        vault.secrets.SetSecret(
            ss.SetSecretRequest(action=ACTION, key="API_TOKEN", value=newer), metadata=dev
        )
    )
    await rec.ok(
        vault.secrets.SetSecret(
            ss.SetSecretRequest(action=ACTION, key="COPY", value=canary), metadata=dev
        )
    )
    bad_requests = [
        ss.SetSecretRequest(action=ACTION, key=canary + "-", value=canary),
        ss.SetSecretRequest(action=ACTION, key="K", value=canary * 2000),
        ss.SetSecretRequest(action=canary + "\n", key="K", value=canary),
        ss.SetSecretRequest(action=ACTION, key=canary + "\n", value=canary),
    ]
    for request in bad_requests:
        assert await rec.fails(vault.secrets.SetSecret(request, metadata=dev)) == (
            grpc.StatusCode.INVALID_ARGUMENT
        )
    await rec.fails(
        vault.secrets.SetSecret(
            ss.SetSecretRequest(action=ACTION, key="K", value=canary),
            metadata=tenant.metadata("viewer"),
        )
    )
    await rec.fails(
        vault.secrets.SetSecret(
            ss.SetSecretRequest(organization_id=tenant.org, action=ACTION, key="K", value=canary),
            metadata=other_tenant.metadata("admin"),
        )
    )
    await rec.fails(
        vault.secrets.SetSecret(ss.SetSecretRequest(action=ACTION, key="K", value=canary))
    )

    # Reads of metadata.
    await rec.ok(vault.secrets.ListSecrets(ss.ListSecretsRequest(), metadata=dev))
    await rec.ok(
        vault.secrets.ListSecretVersions(
            ss.ListSecretVersionsRequest(action=ACTION, key="API_TOKEN"), metadata=dev
        )
    )

    # The one legitimate read, through the executor's client.
    async with vault.client() as client:
        assert await client.resolve(tenant.org, ACTION, ["API_TOKEN", "ABSENT"], "leak scan") == {
            "API_TOKEN": newer
        }
    # Refused reads.
    resolve_request = rs.ResolveRequest(
        organization_id=tenant.org, action=ACTION, keys=["API_TOKEN"]
    )
    await rec.fails(vault.public_resolver.Resolve(resolve_request, metadata=admin))
    await rec.fails(vault.public_resolver.Resolve(resolve_request, metadata=operator))
    async with vault.client("orchestrator") as intruder:
        with pytest.raises(VaultError) as refused:
            await intruder.resolve(tenant.org, ACTION, ["API_TOKEN"])
    # A tampered row: integrity failure on Resolve and on Rewrap.
    await vault.sql(
        "UPDATE vault.secret_versions SET ciphertext = set_byte(ciphertext, 5,"
        " get_byte(ciphertext, 5) # 4) WHERE key = 'COPY'"
    )
    executor = vault.service_channel("executor")
    try:
        stub = resolver_grpc.SecretResolverServiceStub(executor)
        await rec.fails(
            stub.Resolve(
                rs.ResolveRequest(
                    organization_id=tenant.org, action=ACTION, keys=["COPY", "API_TOKEN"]
                )
            )
        )
    finally:
        await executor.close()

    # Key ring operations and the audit log.
    ring, _ = vault.vault.keys.ring.with_new_key()
    await vault.vault.reload_keyring(ring)
    await rec.ok(vault.key_ring.Rewrap(kr.RewrapRequest(), metadata=operator))
    await rec.ok(vault.key_ring.ListKeyVersions(kr.ListKeyVersionsRequest(), metadata=operator))
    await rec.fails(
        vault.key_ring.RetireKeyVersion(kr.RetireKeyVersionRequest(version=2), metadata=operator)
    )
    # Rewrap moved even the tampered row's data key: it never opens a value.
    await rec.ok(
        vault.key_ring.RetireKeyVersion(kr.RetireKeyVersionRequest(version=1), metadata=operator)
    )
    await rec.ok(vault.audit.ListAuditEvents(au.ListAuditEventsRequest(), metadata=admin))
    await rec.ok(vault.audit.ListAuditEvents(au.ListAuditEventsRequest(), metadata=operator))
    await rec.ok(
        vault.secrets.PurgeSecretVersions(
            ss.PurgeSecretVersionsRequest(action=ACTION, key="API_TOKEN"), metadata=dev
        )
    )
    await rec.ok(
        vault.secrets.DeleteSecret(
            ss.DeleteSecretRequest(action=ACTION, key="API_TOKEN"), metadata=dev
        )
    )
    await rec.fails(
        vault.secrets.DeleteSecret(
            ss.DeleteSecretRequest(action=ACTION, key="API_TOKEN"), metadata=dev
        )
    )

    # ---- the scan: the value (either version) must be nowhere.
    texts = (canary, canary.encode().hex())
    needles = (*texts, *(t.encode() for t in texts))
    assert len(rec.responses) == 12 and len(rec.errors) == 12

    def leaks(text: str | bytes) -> bool:
        if isinstance(text, bytes):
            return any(n in text for n in needles if isinstance(n, bytes))
        return any(n in text for n in needles if isinstance(n, str))

    for response in rec.responses:
        assert not leaks(str(response)) and not leaks(response.SerializeToString()), response
    for error in rec.errors:
        assert not leaks(error.details() or "")
        assert not leaks(error.debug_error_string() or "")
        for _, value in error.trailing_metadata() or ():
            assert not leaks(value)
    assert not leaks(str(refused.value))

    records = caplog.records
    assert records, "nothing was logged at DEBUG"
    formatter = logging.Formatter("%(message)s")
    for record in records:
        assert not leaks(formatter.format(record)), record.name
        assert not leaks(repr(record.args))
    assert not leaks(caplog.text)
    assert any("failed authentication" in r.getMessage() for r in records)

    finished = spans.get_finished_spans()
    names = {s.name for s in finished}
    assert "/eventflow.vault.v1.SecretService/SetSecret" in names
    assert "/eventflow.vault.v1.SecretResolverService/Resolve" in names
    for span in finished:
        assert not leaks(span.to_json())

    for table in ("secrets", "secret_versions", "retired_key_versions", "audit_events"):
        for (row,) in await vault.sql(f"SELECT t::text FROM vault.{table} t"):
            assert not leaks(str(row)), table
