"""The key ring over real gRPC and PostgreSQL: rotation, Rewrap, retirement,
and readers that never notice (SPEC §10). Each test owns its vault and
database, since key ring operations span every tenant."""

from __future__ import annotations

import asyncio
import logging

import grpc
import pytest
from eventflow.vault.v1 import audit_service_pb2 as au
from eventflow.vault.v1 import key_ring_service_pb2 as kr
from eventflow.vault.v1 import resolver_service_pb2 as rs
from eventflow.vault.v1 import resolver_service_pb2_grpc as resolver_grpc
from eventflow.vault.v1 import secret_service_pb2 as ss

from libs.auth import Principal, Role
from libs.errors import EventflowError
from services.vault.domain.key_ring import KeyRing, KeyRingError
from services.vault.domain.values import SecretValue
from services.vault.server import build_vault
from tests.conftest import Tenant
from tests.integration.helpers import rpc_error
from tests.vault.conftest import Metadata, VaultServer, ring_of

ACTION = "score-order"


async def given(vault: VaultServer, tenant: Tenant, **secrets: str) -> None:
    for key, value in secrets.items():
        await vault.secrets.SetSecret(
            ss.SetSecretRequest(action=ACTION, key=key, value=value),
            metadata=tenant.metadata("developer"),
        )


async def usage(vault: VaultServer, operator: Metadata) -> dict[int, tuple[int, int]]:
    """{version: (state, usage count)}"""
    response = await vault.key_ring.ListKeyVersions(kr.ListKeyVersionsRequest(), metadata=operator)
    return {k.version: (k.state, k.usage_count) for k in response.key_versions}


async def resolve_all(vault: VaultServer, tenant: Tenant, keys: list[str]) -> dict[str, str]:
    channel = vault.service_channel("executor")
    try:
        response = await resolver_grpc.SecretResolverServiceStub(channel).Resolve(
            rs.ResolveRequest(organization_id=tenant.org, action=ACTION, keys=keys)
        )
    finally:
        await channel.close()
    return {s.key: s.value for s in response.secrets}


def extended(vault: VaultServer) -> KeyRing:
    ring, _ = vault.vault.keys.ring.with_new_key()
    return ring


async def test_the_operator_sees_versions_with_usage_and_fingerprints(
    own_vault: VaultServer, tenant: Tenant, operator: Metadata
) -> None:
    await given(own_vault, tenant, A="1", B="2")
    response = await own_vault.key_ring.ListKeyVersions(
        kr.ListKeyVersionsRequest(), metadata=operator
    )
    assert response.primary_version == 1
    [key] = response.key_versions
    assert (key.version, key.state, key.usage_count) == (1, kr.KEY_VERSION_STATE_PRIMARY, 2)
    assert key.fingerprint == own_vault.vault.keys.ring.primary.fingerprint


@pytest.mark.parametrize("role", ["viewer", "developer", "admin"])
async def test_the_key_ring_is_the_operators_alone(
    own_vault: VaultServer, tenant: Tenant, role: str
) -> None:
    metadata = tenant.metadata(role)
    expected = "OPERATOR_ONLY" if role == "admin" else "ROLE_TOO_LOW"
    for call in (
        own_vault.key_ring.ListKeyVersions(kr.ListKeyVersionsRequest(), metadata=metadata),
        own_vault.key_ring.Rewrap(kr.RewrapRequest(), metadata=metadata),
        own_vault.key_ring.RetireKeyVersion(
            kr.RetireKeyVersionRequest(version=1), metadata=metadata
        ),
    ):
        error = await rpc_error(call)
        assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, expected)


async def test_rotation_rewrap_and_retire_end_to_end(
    own_vault: VaultServer, tenant: Tenant, other_tenant: Tenant, operator: Metadata
) -> None:
    await given(own_vault, tenant, RISK_THRESHOLD="0.8", API_TOKEN="tok")
    await given(own_vault, other_tenant, RISK_THRESHOLD="0.1")
    old_wrapping = await own_vault.sql("SELECT wrapped_dek, ciphertext FROM vault.secret_versions")

    await own_vault.vault.reload_keyring(extended(own_vault))  # rotate: version 2 is primary
    await given(own_vault, tenant, NEW_ONE="fresh")
    assert await usage(own_vault, operator) == {
        2: (kr.KEY_VERSION_STATE_PRIMARY, 1),
        1: (kr.KEY_VERSION_STATE_DECRYPT_ONLY, 3),
    }

    result = await own_vault.key_ring.Rewrap(kr.RewrapRequest(), metadata=operator)
    assert (result.primary_version, result.rewrapped, result.failed) == (2, 3, 0)
    assert await usage(own_vault, operator) == {
        2: (kr.KEY_VERSION_STATE_PRIMARY, 4),
        1: (kr.KEY_VERSION_STATE_DECRYPT_ONLY, 0),
    }
    new_wrapping = await own_vault.sql("SELECT wrapped_dek, ciphertext FROM vault.secret_versions")
    # Value ciphertexts untouched: only the data keys were re-wrapped.
    assert {c for _, c in old_wrapping} <= {c for _, c in new_wrapping}
    assert not {w for w, _ in old_wrapping} & {w for w, _ in new_wrapping}
    again = await own_vault.key_ring.Rewrap(kr.RewrapRequest(), metadata=operator)
    assert again.rewrapped == 0

    retired = await own_vault.key_ring.RetireKeyVersion(
        kr.RetireKeyVersionRequest(version=1), metadata=operator
    )
    assert retired.key_version.state == kr.KEY_VERSION_STATE_RETIRED
    assert retired.key_version.retire_time.seconds

    # The retired key leaves the configuration; every secret still resolves.
    only_new = KeyRing([own_vault.vault.keys.ring.primary])
    await own_vault.vault.reload_keyring(only_new)
    assert await resolve_all(own_vault, tenant, ["RISK_THRESHOLD", "API_TOKEN", "NEW_ONE"]) == {
        "RISK_THRESHOLD": "0.8",
        "API_TOKEN": "tok",
        "NEW_ONE": "fresh",
    }
    assert await resolve_all(own_vault, other_tenant, ["RISK_THRESHOLD"]) == {
        "RISK_THRESHOLD": "0.1"
    }
    states = await usage(own_vault, operator)
    assert states[1] == (kr.KEY_VERSION_STATE_RETIRED, 0)


async def test_retire_is_refused_while_a_secret_uses_the_version(
    own_vault: VaultServer, tenant: Tenant, operator: Metadata
) -> None:
    await given(own_vault, tenant, K="v")
    await own_vault.vault.reload_keyring(extended(own_vault))
    error = await rpc_error(
        own_vault.key_ring.RetireKeyVersion(
            kr.RetireKeyVersionRequest(version=1), metadata=operator
        )
    )
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "KEY_VERSION_IN_USE")
    assert "1 secret version" in error.message
    platform = await own_vault.audit.ListAuditEvents(
        au.ListAuditEventsRequest(operation=au.AUDIT_OPERATION_RETIRE_KEY_VERSION),
        metadata=operator,
    )
    assert [e.outcome for e in platform.events] == [au.AUDIT_OUTCOME_REFUSED]


async def test_the_primary_cannot_be_retired(own_vault: VaultServer, operator: Metadata) -> None:
    error = await rpc_error(
        own_vault.key_ring.RetireKeyVersion(
            kr.RetireKeyVersionRequest(version=1), metadata=operator
        )
    )
    assert (error.code, error.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "KEY_VERSION_PRIMARY",
    )


async def test_an_unknown_version_is_not_found(own_vault: VaultServer, operator: Metadata) -> None:
    error = await rpc_error(
        own_vault.key_ring.RetireKeyVersion(
            kr.RetireKeyVersionRequest(version=9), metadata=operator
        )
    )
    assert (error.code, error.reason) == (grpc.StatusCode.NOT_FOUND, "KEY_VERSION_NOT_FOUND")


async def test_readers_never_see_an_error_during_rewrap_and_retire(
    own_vault: VaultServer, tenant: Tenant, operator: Metadata
) -> None:
    expected = {f"KEY_{i:02d}": f"value-{i}" for i in range(20)}
    await given(own_vault, tenant, **expected)  # more rows than one Rewrap batch (7)
    await own_vault.vault.reload_keyring(extended(own_vault))
    done = asyncio.Event()
    reads = 0

    async def reader() -> None:
        nonlocal reads
        channel = own_vault.service_channel("executor")
        stub = resolver_grpc.SecretResolverServiceStub(channel)
        try:
            while not done.is_set():
                response = await stub.Resolve(
                    rs.ResolveRequest(
                        organization_id=tenant.org, action=ACTION, keys=list(expected)
                    )
                )
                assert {s.key: s.value for s in response.secrets} == expected
                reads += 1
        finally:
            await channel.close()

    readers = [asyncio.create_task(reader()) for _ in range(3)]
    await asyncio.sleep(0.05)
    result = await own_vault.key_ring.Rewrap(kr.RewrapRequest(), metadata=operator)
    await own_vault.key_ring.RetireKeyVersion(
        kr.RetireKeyVersionRequest(version=1), metadata=operator
    )
    await own_vault.vault.reload_keyring(KeyRing([own_vault.vault.keys.ring.primary]))
    await asyncio.sleep(0.05)
    done.set()
    await asyncio.gather(*readers)  # re-raises any reader's failure
    assert result.rewrapped == len(expected) and reads > 3


async def test_rewrap_skips_and_reports_a_tampered_row(
    own_vault: VaultServer, tenant: Tenant, operator: Metadata, caplog: pytest.LogCaptureFixture
) -> None:
    await given(own_vault, tenant, GOOD="ok", BAD="sk_live_CANARY_rewrap")
    await own_vault.sql(
        "UPDATE vault.secret_versions SET wrapped_dek = set_byte(wrapped_dek, 3,"
        " get_byte(wrapped_dek, 3) # 128) WHERE key = 'BAD'"
    )
    await own_vault.vault.reload_keyring(extended(own_vault))
    with caplog.at_level(logging.ERROR, logger="eventflow.vault"):
        result = await own_vault.key_ring.Rewrap(kr.RewrapRequest(), metadata=operator)
    assert (result.rewrapped, result.failed) == (1, 1)
    assert "BAD" in caplog.text and "CANARY" not in caplog.text
    events = await own_vault.audit.ListAuditEvents(
        au.ListAuditEventsRequest(operation=au.AUDIT_OPERATION_REWRAP),
        metadata=tenant.metadata("admin"),
    )
    assert {(e.key, e.outcome) for e in events.events} == {
        ("GOOD", au.AUDIT_OUTCOME_OK),
        ("BAD", au.AUDIT_OUTCOME_INTEGRITY_ERROR),
    }
    assert all(e.detail == "key version 1 -> 2" for e in events.events)
    platform = await own_vault.audit.ListAuditEvents(
        au.ListAuditEventsRequest(operation=au.AUDIT_OPERATION_REWRAP), metadata=operator
    )
    assert "1 secret version(s) re-wrapped to key version 2; 1 failed" in platform.events[0].detail
    error = await rpc_error(
        own_vault.key_ring.RetireKeyVersion(
            kr.RetireKeyVersionRequest(version=1), metadata=operator
        )
    )
    assert error.reason == "KEY_VERSION_IN_USE"


async def test_a_key_missing_from_the_ring_is_listed_and_reported(
    own_vault: VaultServer,
    tenant: Tenant,
    operator: Metadata,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await given(own_vault, tenant, K="v")
    with caplog.at_level(logging.ERROR, logger="eventflow.vault"):
        await own_vault.vault.reload_keyring(ring_of(2))  # version 1 lost
    assert "key version 1, which the key ring lacks" in caplog.text
    assert (await usage(own_vault, operator))[1] == (kr.KEY_VERSION_STATE_MISSING, 1)
    channel = own_vault.service_channel("executor")
    try:
        error = await rpc_error(
            resolver_grpc.SecretResolverServiceStub(channel).Resolve(
                rs.ResolveRequest(organization_id=tenant.org, action=ACTION, keys=["K"])
            )
        )
    finally:
        await channel.close()
    assert (error.code, error.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "KEY_VERSION_UNAVAILABLE",
    )


async def test_a_ring_whose_primary_was_retired_is_refused(
    own_vault: VaultServer, operator: Metadata
) -> None:
    first = own_vault.vault.keys.ring
    await own_vault.vault.reload_keyring(extended(own_vault))
    await own_vault.key_ring.RetireKeyVersion(
        kr.RetireKeyVersionRequest(version=1), metadata=operator
    )
    with pytest.raises(KeyRingError, match="retired"):
        await own_vault.vault.reload_keyring(first)


async def test_a_stale_replica_cannot_write_with_a_retired_key(
    own_vault: VaultServer, tenant: Tenant, operator: Metadata
) -> None:
    stale = build_vault(own_vault.pool, own_vault.vault.keys.ring)  # still on version 1
    await own_vault.vault.reload_keyring(extended(own_vault))
    await own_vault.key_ring.RetireKeyVersion(
        kr.RetireKeyVersionRequest(version=1), metadata=operator
    )
    developer = Principal("dev", tenant.org, None, Role.DEVELOPER)
    with pytest.raises(EventflowError) as caught:
        await stale.secrets.set_secret(developer, "", ACTION, "K", SecretValue("v"))
    assert caught.value.reason == "KEY_VERSION_RETIRED"
    assert await usage(own_vault, operator) == {
        2: (kr.KEY_VERSION_STATE_PRIMARY, 0),
        1: (kr.KEY_VERSION_STATE_RETIRED, 0),
    }
