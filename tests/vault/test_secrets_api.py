"""SecretService over real gRPC and PostgreSQL: set, list, versions, delete,
purge; validation, roles and tenant isolation (SPEC §2, §10)."""

from __future__ import annotations

import grpc
import pytest
from eventflow.vault.v1 import resolver_service_pb2 as rs
from eventflow.vault.v1 import resolver_service_pb2_grpc as resolver_grpc
from eventflow.vault.v1 import secret_service_pb2 as ss

from tests.conftest import Tenant, bearer, make_tenant
from tests.integration.helpers import rpc_error, violation_fields
from tests.vault.conftest import Metadata, VaultServer

ACTION = "score-order"


async def set_secret(
    vault: VaultServer, tenant: Tenant, key: str, value: str, action: str = ACTION, **kw: str
) -> ss.Secret:
    response = await vault.secrets.SetSecret(
        ss.SetSecretRequest(action=action, key=key, value=value, **kw),
        metadata=tenant.metadata("developer"),
    )
    return response.secret


async def listed(vault: VaultServer, tenant: Tenant, action: str = ACTION) -> dict[str, int]:
    response = await vault.secrets.ListSecrets(
        ss.ListSecretsRequest(action=action), metadata=tenant.metadata("viewer")
    )
    return {s.key: s.version for s in response.secrets}


async def resolve(
    resolver: resolver_grpc.SecretResolverServiceStub,
    tenant: Tenant,
    keys: list[str],
    action: str = ACTION,
) -> dict[str, str]:
    response = await resolver.Resolve(
        rs.ResolveRequest(organization_id=tenant.org, action=action, keys=keys)
    )
    return {s.key: s.value for s in response.secrets}


async def test_set_stores_a_first_version_and_answers_metadata_only(
    vault: VaultServer, tenant: Tenant
) -> None:
    secret = await set_secret(vault, tenant, "RISK_THRESHOLD", "0.8")
    assert (secret.organization_id, secret.action, secret.key, secret.version) == (
        tenant.org,
        ACTION,
        "RISK_THRESHOLD",
        1,
    )
    assert secret.create_time.seconds and secret.update_time.seconds
    assert secret.updated_by  # the developer key's id
    assert "value" not in {f.name for f in ss.Secret.DESCRIPTOR.fields}
    assert await listed(vault, tenant) == {"RISK_THRESHOLD": 1}


async def test_every_set_is_a_new_version_and_the_newest_is_served(
    vault: VaultServer, tenant: Tenant, resolver: resolver_grpc.SecretResolverServiceStub
) -> None:
    for value in ("one", "two", "three"):
        secret = await set_secret(vault, tenant, "API_TOKEN", value)
    assert secret.version == 3
    assert await resolve(resolver, tenant, ["API_TOKEN"]) == {"API_TOKEN": "three"}
    versions = await vault.secrets.ListSecretVersions(
        ss.ListSecretVersionsRequest(action=ACTION, key="API_TOKEN"),
        metadata=tenant.metadata("viewer"),
    )
    assert [(v.version, v.state) for v in versions.versions] == [
        (3, ss.SECRET_VERSION_STATE_CURRENT),
        (2, ss.SECRET_VERSION_STATE_SUPERSEDED),
        (1, ss.SECRET_VERSION_STATE_SUPERSEDED),
    ]


async def test_secrets_are_scoped_per_action(
    vault: VaultServer, tenant: Tenant, resolver: resolver_grpc.SecretResolverServiceStub
) -> None:
    await set_secret(vault, tenant, "TOKEN", "for-scoring", action="score-order")
    await set_secret(vault, tenant, "TOKEN", "for-shipping", action="ship-order")
    assert await resolve(resolver, tenant, ["TOKEN"], "score-order") == {"TOKEN": "for-scoring"}
    assert await resolve(resolver, tenant, ["TOKEN"], "ship-order") == {"TOKEN": "for-shipping"}
    assert await resolve(resolver, tenant, ["TOKEN"], "other") == {}
    everything = await vault.secrets.ListSecrets(
        ss.ListSecretsRequest(), metadata=tenant.metadata("viewer")
    )
    assert [(s.action, s.key) for s in everything.secrets] == [
        ("score-order", "TOKEN"),
        ("ship-order", "TOKEN"),
    ]


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"action": ACTION, "key": "bad-key", "value": "v"}, "key"),
        ({"action": ACTION, "key": "KEY\n", "value": "v"}, "key"),
        ({"action": ACTION, "key": "", "value": "v"}, "key"),
        ({"action": ACTION, "key": "K" * 65, "value": "v"}, "key"),
        ({"action": "", "key": "KEY", "value": "v"}, "action"),
        ({"action": " padded", "key": "KEY", "value": "v"}, "action"),
        ({"action": ACTION, "key": "KEY", "value": ""}, "value"),
        ({"action": ACTION, "key": "KEY", "value": "x" * (64 * 1024 + 1)}, "value"),
    ],
)
async def test_bad_input_is_refused_naming_the_field_and_nothing_is_stored(
    vault: VaultServer, tenant: Tenant, request_fields: dict[str, str], field: str
) -> None:
    error = await rpc_error(
        vault.secrets.SetSecret(
            ss.SetSecretRequest(**request_fields), metadata=tenant.metadata("developer")
        )
    )
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert violation_fields(error) == [field]
    everything = await vault.secrets.ListSecrets(
        ss.ListSecretsRequest(), metadata=tenant.metadata("viewer")
    )
    assert list(everything.secrets) == []
    rows = await vault.sql(
        "SELECT count(*) FROM vault.secret_versions WHERE organization_id = %s", (tenant.org,)
    )
    assert rows == [(0,)]


async def test_a_value_of_exactly_64_kib_is_accepted(vault: VaultServer, tenant: Tenant) -> None:
    secret = await set_secret(vault, tenant, "BIG", "x" * (64 * 1024))
    assert secret.version == 1


async def test_viewers_cannot_write_and_developers_can(vault: VaultServer, tenant: Tenant) -> None:
    viewer = tenant.metadata("viewer")
    calls = [
        vault.secrets.SetSecret(
            ss.SetSecretRequest(action=ACTION, key="K", value="v"), metadata=viewer
        ),
        vault.secrets.DeleteSecret(ss.DeleteSecretRequest(action=ACTION, key="K"), metadata=viewer),
        vault.secrets.PurgeSecretVersions(
            ss.PurgeSecretVersionsRequest(action=ACTION, key="K"), metadata=viewer
        ),
    ]
    for call in calls:
        error = await rpc_error(call)
        assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_TOO_LOW")
    await set_secret(vault, tenant, "K", "v")


async def test_a_call_without_a_key_is_unauthenticated(vault: VaultServer) -> None:
    error = await rpc_error(vault.secrets.ListSecrets(ss.ListSecretsRequest()))
    assert error.code == grpc.StatusCode.UNAUTHENTICATED


async def test_a_project_bound_key_lists_but_cannot_change_secrets(
    vault: VaultServer, channel: grpc.aio.Channel, operator_token: str
) -> None:
    bound = await make_tenant(channel, operator_token, project_key=True)
    error = await rpc_error(
        vault.secrets.SetSecret(
            ss.SetSecretRequest(action=ACTION, key="K", value="v"),
            metadata=bound.metadata("admin"),
        )
    )
    assert (error.code, error.reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "ORGANIZATION_KEY_REQUIRED",
    )
    await vault.secrets.ListSecrets(ss.ListSecretsRequest(), metadata=bound.metadata("viewer"))


async def test_another_organization_sees_and_changes_nothing(
    vault: VaultServer,
    tenant: Tenant,
    other_tenant: Tenant,
    resolver: resolver_grpc.SecretResolverServiceStub,
) -> None:
    await set_secret(vault, tenant, "SHARED_NAME", "tenant-a-value")
    intruder = other_tenant.metadata("admin")
    assert await listed(vault, other_tenant) == {}

    for call in (
        vault.secrets.ListSecrets(
            ss.ListSecretsRequest(organization_id=tenant.org), metadata=intruder
        ),
        vault.secrets.SetSecret(
            ss.SetSecretRequest(
                organization_id=tenant.org, action=ACTION, key="SHARED_NAME", value="evil"
            ),
            metadata=intruder,
        ),
        vault.secrets.DeleteSecret(
            ss.DeleteSecretRequest(organization_id=tenant.org, action=ACTION, key="SHARED_NAME"),
            metadata=intruder,
        ),
    ):
        error = await rpc_error(call)
        assert (error.code, error.reason) == (
            grpc.StatusCode.PERMISSION_DENIED,
            "ORGANIZATION_NOT_ALLOWED",
        )
    # The same names inside its own organization are its own, independent secrets.
    missing = await rpc_error(
        vault.secrets.DeleteSecret(
            ss.DeleteSecretRequest(action=ACTION, key="SHARED_NAME"), metadata=intruder
        )
    )
    assert missing.code == grpc.StatusCode.NOT_FOUND
    await set_secret(vault, other_tenant, "SHARED_NAME", "tenant-b-value")
    assert await resolve(resolver, tenant, ["SHARED_NAME"]) == {"SHARED_NAME": "tenant-a-value"}
    assert await resolve(resolver, other_tenant, ["SHARED_NAME"]) == {
        "SHARED_NAME": "tenant-b-value"
    }


async def test_an_unknown_organization_is_refused_like_a_known_one(
    vault: VaultServer, other_tenant: Tenant
) -> None:
    error = await rpc_error(
        vault.secrets.ListSecrets(
            ss.ListSecretsRequest(organization_id="no-such-org"),
            metadata=other_tenant.metadata("admin"),
        )
    )
    assert error.reason == "ORGANIZATION_NOT_ALLOWED"


async def test_delete_stops_serving_destroys_every_version_and_numbering_continues(
    vault: VaultServer, tenant: Tenant, resolver: resolver_grpc.SecretResolverServiceStub
) -> None:
    await set_secret(vault, tenant, "GONE", "first")
    await set_secret(vault, tenant, "GONE", "second")
    deleted = await vault.secrets.DeleteSecret(
        ss.DeleteSecretRequest(action=ACTION, key="GONE"), metadata=tenant.metadata("developer")
    )
    assert deleted.destroyed_versions == 2
    assert await listed(vault, tenant) == {}
    assert await resolve(resolver, tenant, ["GONE"]) == {}
    rows = await vault.sql(
        "SELECT count(*) FROM vault.secret_versions WHERE organization_id = %s"
        " AND (ciphertext IS NOT NULL OR wrapped_dek IS NOT NULL)",
        (tenant.org,),
    )
    assert rows == [(0,)]
    again = await rpc_error(
        vault.secrets.DeleteSecret(
            ss.DeleteSecretRequest(action=ACTION, key="GONE"),
            metadata=tenant.metadata("developer"),
        )
    )
    assert (again.code, again.reason) == (grpc.StatusCode.NOT_FOUND, "SECRET_NOT_FOUND")
    recreated = await set_secret(vault, tenant, "GONE", "third")
    assert recreated.version == 3
    assert await resolve(resolver, tenant, ["GONE"]) == {"GONE": "third"}


async def test_purge_destroys_older_versions_and_keeps_serving_the_newest(
    vault: VaultServer, tenant: Tenant, resolver: resolver_grpc.SecretResolverServiceStub
) -> None:
    for value in ("v1", "v2", "v3"):
        await set_secret(vault, tenant, "ROTATED", value)
    purged = await vault.secrets.PurgeSecretVersions(
        ss.PurgeSecretVersionsRequest(action=ACTION, key="ROTATED"),
        metadata=tenant.metadata("developer"),
    )
    assert (purged.destroyed_versions, purged.current_version) == (2, 3)
    assert await resolve(resolver, tenant, ["ROTATED"]) == {"ROTATED": "v3"}
    versions = await vault.secrets.ListSecretVersions(
        ss.ListSecretVersionsRequest(action=ACTION, key="ROTATED"),
        metadata=tenant.metadata("viewer"),
    )
    assert [v.state for v in versions.versions] == [
        ss.SECRET_VERSION_STATE_CURRENT,
        ss.SECRET_VERSION_STATE_DESTROYED,
        ss.SECRET_VERSION_STATE_DESTROYED,
    ]
    assert all(v.destroy_time.seconds for v in versions.versions[1:])
    again = await vault.secrets.PurgeSecretVersions(
        ss.PurgeSecretVersionsRequest(action=ACTION, key="ROTATED"),
        metadata=tenant.metadata("developer"),
    )
    assert again.destroyed_versions == 0


async def test_versions_of_a_missing_secret_are_not_found(
    vault: VaultServer, tenant: Tenant
) -> None:
    error = await rpc_error(
        vault.secrets.ListSecretVersions(
            ss.ListSecretVersionsRequest(action=ACTION, key="NOPE"),
            metadata=tenant.metadata("viewer"),
        )
    )
    assert error.code == grpc.StatusCode.NOT_FOUND


async def test_listing_pages_through_every_secret(vault: VaultServer, tenant: Tenant) -> None:
    keys = [f"KEY_{i:02d}" for i in range(7)]
    for key in keys:
        await set_secret(vault, tenant, key, "v")
    seen: list[str] = []
    token = ""
    while True:
        page = await vault.secrets.ListSecrets(
            ss.ListSecretsRequest(action=ACTION, page_size=3, page_token=token),
            metadata=tenant.metadata("viewer"),
        )
        seen.extend(s.key for s in page.secrets)
        token = page.next_page_token
        if not token:
            break
    assert seen == keys
    error = await rpc_error(
        vault.secrets.ListSecrets(
            ss.ListSecretsRequest(page_token="garbage"), metadata=tenant.metadata("viewer")
        )
    )
    assert violation_fields(error) == ["page_token"]


async def test_the_operator_manages_a_named_organization(
    vault: VaultServer, tenant: Tenant, operator: Metadata
) -> None:
    response = await vault.secrets.SetSecret(
        ss.SetSecretRequest(organization_id=tenant.org, action=ACTION, key="K", value="v"),
        metadata=operator,
    )
    assert response.secret.updated_by == "operator"
    error = await rpc_error(vault.secrets.ListSecrets(ss.ListSecretsRequest(), metadata=operator))
    assert violation_fields(error) == ["organization_id"]


async def test_the_executor_identity_does_not_open_tenant_methods(
    vault: VaultServer, executor_channel: grpc.aio.Channel
) -> None:
    from eventflow.vault.v1 import secret_service_pb2_grpc

    stub = secret_service_pb2_grpc.SecretServiceStub(executor_channel)
    error = await rpc_error(stub.ListSecrets(ss.ListSecretsRequest(organization_id="any")))
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "SERVICE_NOT_ALLOWED")


async def test_a_revoked_key_is_refused(vault: VaultServer, tenant: Tenant) -> None:
    from eventflow.registry.v1 import tenancy_service_pb2 as tn

    keys = await tenant.tenancy.ListApiKeys(
        tn.ListApiKeysRequest(), metadata=tenant.metadata("admin")
    )
    developer = next(k for k in keys.api_keys if k.role == "developer")
    await tenant.tenancy.RevokeApiKey(
        tn.RevokeApiKeyRequest(id=developer.id), metadata=tenant.metadata("admin")
    )
    error = await rpc_error(
        vault.secrets.ListSecrets(
            ss.ListSecretsRequest(), metadata=bearer(tenant.keys["developer"])
        )
    )
    assert error.code == grpc.StatusCode.UNAUTHENTICATED
