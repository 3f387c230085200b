"""Resolve: the executor's read of values, over the internal mutual-TLS
listener, answered to the executor's certificate only, audited per key."""

from __future__ import annotations

import logging
from pathlib import Path

import grpc
import pytest
from eventflow.vault.v1 import audit_service_pb2 as au
from eventflow.vault.v1 import resolver_service_pb2 as rs
from eventflow.vault.v1 import resolver_service_pb2_grpc as resolver_grpc
from eventflow.vault.v1 import secret_service_pb2 as ss

from libs.identity import ServiceCertificates, create_dev_pki
from libs.server import start_server
from libs.vault_client import SecretSource, VaultClient, VaultError
from tests.conftest import Tenant
from tests.integration.helpers import rpc_error, violation_fields
from tests.vault.conftest import Metadata, VaultServer

ACTION = "score-order"


async def given(vault: VaultServer, tenant: Tenant, **secrets: str) -> None:
    for key, value in secrets.items():
        await vault.secrets.SetSecret(
            ss.SetSecretRequest(action=ACTION, key=key, value=value),
            metadata=tenant.metadata("developer"),
        )


def request(tenant: Tenant, *keys: str, **kw: str) -> rs.ResolveRequest:
    return rs.ResolveRequest(organization_id=tenant.org, action=ACTION, keys=keys, **kw)


async def audit_events(
    vault: VaultServer, tenant: Tenant, operation: int = au.AUDIT_OPERATION_RESOLVE
) -> list[au.AuditEvent]:
    response = await vault.audit.ListAuditEvents(
        au.ListAuditEventsRequest(operation=operation), metadata=tenant.metadata("admin")
    )
    return list(response.events)


async def test_the_executor_gets_exactly_the_stored_keys_it_asks_for(
    vault: VaultServer, tenant: Tenant, resolver: resolver_grpc.SecretResolverServiceStub
) -> None:
    await given(vault, tenant, RISK_THRESHOLD="0.8", API_TOKEN="tok", UNASKED="x")
    response = await resolver.Resolve(request(tenant, "RISK_THRESHOLD", "MISSING", "API_TOKEN"))
    assert [(s.key, s.value, s.version) for s in response.secrets] == [
        ("RISK_THRESHOLD", "0.8", 1),
        ("API_TOKEN", "tok", 1),
    ]


async def test_duplicate_and_no_keys(
    vault: VaultServer, tenant: Tenant, resolver: resolver_grpc.SecretResolverServiceStub
) -> None:
    await given(vault, tenant, K="v")
    response = await resolver.Resolve(request(tenant, "K", "K"))
    assert [s.key for s in response.secrets] == ["K"]
    assert list((await resolver.Resolve(request(tenant))).secrets) == []


async def test_bad_resolve_input_is_refused_naming_the_field(
    tenant: Tenant, resolver: resolver_grpc.SecretResolverServiceStub
) -> None:
    error = await rpc_error(resolver.Resolve(request(tenant, "GOOD", "bad key")))
    assert violation_fields(error) == ["keys[1]"]
    error = await rpc_error(resolver.Resolve(rs.ResolveRequest(action=ACTION, keys=["K"])))
    assert violation_fields(error) == ["organization_id"]
    error = await rpc_error(
        resolver.Resolve(rs.ResolveRequest(organization_id=tenant.org, keys=["K"]))
    )
    assert violation_fields(error) == ["action"]


async def test_another_services_certificate_is_refused(vault: VaultServer, tenant: Tenant) -> None:
    await given(vault, tenant, K="v")
    for service in ("orchestrator", "governance", "registry", "vault"):
        channel = vault.service_channel(service)
        try:
            stub = resolver_grpc.SecretResolverServiceStub(channel)
            error = await rpc_error(stub.Resolve(request(tenant, "K")))
        finally:
            await channel.close()
        assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "SERVICE_ONLY")


@pytest.mark.parametrize("role", ["viewer", "developer", "admin"])
async def test_a_tenant_api_key_is_refused_even_an_admin_one(
    vault: VaultServer, tenant: Tenant, role: str
) -> None:
    await given(vault, tenant, K="v")
    error = await rpc_error(
        vault.public_resolver.Resolve(request(tenant, "K"), metadata=tenant.metadata(role))
    )
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "SERVICE_ONLY")


async def test_the_operator_token_is_refused(
    vault: VaultServer, tenant: Tenant, operator: Metadata
) -> None:
    error = await rpc_error(vault.public_resolver.Resolve(request(tenant, "K"), metadata=operator))
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "SERVICE_ONLY")


async def test_no_client_certificate_no_connection(vault: VaultServer, tenant: Tenant) -> None:
    ca = (vault.pki / "ca.pem").read_bytes()
    channel = grpc.aio.secure_channel(
        vault.internal_address,
        grpc.ssl_channel_credentials(ca),
        options=[("grpc.ssl_target_name_override", "vault")],
    )
    try:
        stub = resolver_grpc.SecretResolverServiceStub(channel)
        error = await rpc_error(stub.Resolve(request(tenant, "K"), timeout=5))
    finally:
        await channel.close()
    assert error.code == grpc.StatusCode.UNAVAILABLE


async def test_refused_resolves_are_platform_audit_entries(
    vault: VaultServer, tenant: Tenant, operator: Metadata
) -> None:
    await rpc_error(
        vault.public_resolver.Resolve(request(tenant, "K"), metadata=tenant.metadata("admin"))
    )
    platform = await vault.audit.ListAuditEvents(
        au.ListAuditEventsRequest(operation=au.AUDIT_OPERATION_RESOLVE), metadata=operator
    )
    denied = [e for e in platform.events if tenant.org in e.detail]
    assert denied and denied[0].outcome == au.AUDIT_OUTCOME_DENIED
    assert denied[0].organization_id == "" and denied[0].caller != "service:executor"
    # The organization named in a refused call gets no entry it did not cause.
    assert await audit_events(vault, tenant) == []


async def test_every_requested_key_is_audited_with_its_outcome(
    vault: VaultServer, tenant: Tenant, resolver: resolver_grpc.SecretResolverServiceStub
) -> None:
    await given(vault, tenant, RISK_THRESHOLD="0.8")
    await given(vault, tenant, RISK_THRESHOLD="0.9")
    await resolver.Resolve(
        request(tenant, "RISK_THRESHOLD", "ABSENT", purpose="instance 42 step 1")
    )
    events = await audit_events(vault, tenant)
    assert {(e.key, e.outcome, e.secret_version) for e in events} == {
        ("RISK_THRESHOLD", au.AUDIT_OUTCOME_OK, 2),
        ("ABSENT", au.AUDIT_OUTCOME_NOT_FOUND, 0),
    }
    assert all(e.caller == "service:executor" and e.action == ACTION for e in events)
    assert all(e.detail == "instance 42 step 1" for e in events)


async def test_a_tampered_row_fails_closed_with_data_loss_audited_and_alerted(
    vault: VaultServer,
    tenant: Tenant,
    resolver: resolver_grpc.SecretResolverServiceStub,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await given(vault, tenant, GOOD="fine", TAMPERED="sk_live_CANARY_tamper")
    await vault.sql(
        "UPDATE vault.secret_versions SET ciphertext = set_byte(ciphertext, 0,"
        " get_byte(ciphertext, 0) # 1) WHERE organization_id = %s AND key = 'TAMPERED'",
        (tenant.org,),
    )
    with caplog.at_level(logging.ERROR, logger="eventflow.vault"):
        error = await rpc_error(resolver.Resolve(request(tenant, "GOOD", "TAMPERED")))
    assert (error.code, error.reason) == (grpc.StatusCode.DATA_LOSS, "SECRET_INTEGRITY")
    assert "TAMPERED" in error.message and "CANARY" not in error.message
    assert any("TAMPERED" in r.getMessage() for r in caplog.records)
    assert "CANARY" not in caplog.text
    outcomes = {e.key: e.outcome for e in await audit_events(vault, tenant)}
    assert outcomes == {"GOOD": au.AUDIT_OUTCOME_OK, "TAMPERED": au.AUDIT_OUTCOME_INTEGRITY_ERROR}


async def test_ciphertexts_swapped_between_rows_fail(
    vault: VaultServer, tenant: Tenant, resolver: resolver_grpc.SecretResolverServiceStub
) -> None:
    await given(vault, tenant, FIRST="one", SECOND="two")
    await vault.sql(
        "UPDATE vault.secret_versions a SET dek_nonce = b.dek_nonce, wrapped_dek = b.wrapped_dek,"
        " value_nonce = b.value_nonce, ciphertext = b.ciphertext"
        " FROM vault.secret_versions b WHERE a.organization_id = %s AND b.organization_id = %s"
        " AND a.key = 'FIRST' AND b.key = 'SECOND'",
        (tenant.org, tenant.org),
    )
    error = await rpc_error(resolver.Resolve(request(tenant, "FIRST")))
    assert error.reason == "SECRET_INTEGRITY"
    still = await resolver.Resolve(request(tenant, "SECOND"))
    assert [s.value for s in still.secrets] == ["two"]


async def test_a_row_copied_into_another_tenant_fails(
    vault: VaultServer,
    tenant: Tenant,
    other_tenant: Tenant,
    resolver: resolver_grpc.SecretResolverServiceStub,
) -> None:
    await given(vault, tenant, TOKEN="tenant-a-secret")
    await given(vault, other_tenant, TOKEN="placeholder")
    await vault.sql(
        "UPDATE vault.secret_versions b SET kek_version = a.kek_version, dek_nonce = a.dek_nonce,"
        " wrapped_dek = a.wrapped_dek, value_nonce = a.value_nonce, ciphertext = a.ciphertext"
        " FROM vault.secret_versions a WHERE a.organization_id = %s AND b.organization_id = %s"
        " AND a.key = 'TOKEN' AND b.key = 'TOKEN'",
        (tenant.org, other_tenant.org),
    )
    error = await rpc_error(
        resolver.Resolve(
            rs.ResolveRequest(organization_id=other_tenant.org, action=ACTION, keys=["TOKEN"])
        )
    )
    assert error.reason == "SECRET_INTEGRITY"


async def test_a_row_relabelled_as_another_version_fails(
    vault: VaultServer, tenant: Tenant, resolver: resolver_grpc.SecretResolverServiceStub
) -> None:
    await given(vault, tenant, K="old")
    await given(vault, tenant, K="new")
    # Point the secret at version 2 while version 2's row holds version 1's envelope.
    await vault.sql(
        "UPDATE vault.secret_versions b SET dek_nonce = a.dek_nonce, wrapped_dek = a.wrapped_dek,"
        " value_nonce = a.value_nonce, ciphertext = a.ciphertext"
        " FROM vault.secret_versions a WHERE a.organization_id = %s AND b.organization_id = %s"
        " AND a.key = 'K' AND b.key = 'K' AND a.version = 1 AND b.version = 2",
        (tenant.org, tenant.org),
    )
    error = await rpc_error(resolver.Resolve(request(tenant, "K")))
    assert error.reason == "SECRET_INTEGRITY"


# ------------------------------------------------------------------ the client


class NoKeys:
    async def find_key(self, key_id: str) -> None:
        return None


async def test_the_vault_client_returns_a_dictionary_of_stored_keys(
    vault: VaultServer, tenant: Tenant
) -> None:
    await given(vault, tenant, RISK_THRESHOLD="0.8")
    async with vault.client() as client:
        source: SecretSource = client
        assert await source.secrets_for(tenant.org, ACTION, ["RISK_THRESHOLD", "ABSENT"]) == {
            "RISK_THRESHOLD": "0.8"
        }
        assert await client.resolve(tenant.org, ACTION, []) == {}


async def test_the_vault_client_raises_a_typed_error(vault: VaultServer, tenant: Tenant) -> None:
    async with vault.client("orchestrator") as client:
        with pytest.raises(VaultError) as caught:
            await client.resolve(tenant.org, ACTION, ["K"])
    assert (caught.value.code, caught.value.reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "SERVICE_ONLY",
    )


async def test_the_vault_client_refuses_a_server_that_is_not_the_vault(
    vault: VaultServer, tenant: Tenant
) -> None:
    """Another service's certificate from the same CA cannot pose as the vault."""
    impostor = await start_server(
        vault.vault.bindings,
        listen="127.0.0.1:0",
        keys=NoKeys(),
        internal_listen="127.0.0.1:0",
        certificates=ServiceCertificates.load(vault.pki, "orchestrator"),
    )
    try:
        client = VaultClient(
            f"127.0.0.1:{impostor.internal_port}", ServiceCertificates.load(vault.pki, "executor")
        )
        async with client:
            with pytest.raises(VaultError) as caught:
                await client.resolve(tenant.org, ACTION, ["K"])
        assert caught.value.code == grpc.StatusCode.UNAVAILABLE
    finally:
        await impostor.stop(0)


async def test_the_vault_client_refuses_a_vault_from_another_ca(
    vault: VaultServer, tenant: Tenant, tmp_path: Path
) -> None:
    foreign = create_dev_pki(tmp_path / "foreign")
    client = VaultClient(vault.internal_address, ServiceCertificates.load(foreign, "executor"))
    async with client:
        with pytest.raises(VaultError) as caught:
            await client.resolve(tenant.org, ACTION, ["K"])
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE
