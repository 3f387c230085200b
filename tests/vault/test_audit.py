"""The audit log over real gRPC: who did what to which secret, when, with what
outcome; for admins of the organization and the operator; append-only."""

from __future__ import annotations

import grpc
import psycopg
import pytest
from eventflow.vault.v1 import audit_service_pb2 as au
from eventflow.vault.v1 import resolver_service_pb2 as rs
from eventflow.vault.v1 import resolver_service_pb2_grpc as resolver_grpc
from eventflow.vault.v1 import secret_service_pb2 as ss

from tests.conftest import Tenant
from tests.integration.helpers import rpc_error, violation_fields
from tests.vault.conftest import Metadata, VaultServer


async def activity(
    vault: VaultServer, tenant: Tenant, resolver: resolver_grpc.SecretResolverServiceStub
) -> None:
    dev = tenant.metadata("developer")
    await vault.secrets.SetSecret(
        ss.SetSecretRequest(action="score", key="RISK", value="0.5"), metadata=dev
    )
    await vault.secrets.SetSecret(
        ss.SetSecretRequest(action="ship", key="TOKEN", value="t"), metadata=dev
    )
    await resolver.Resolve(
        rs.ResolveRequest(organization_id=tenant.org, action="score", keys=["RISK"])
    )
    await vault.secrets.PurgeSecretVersions(
        ss.PurgeSecretVersionsRequest(action="score", key="RISK"), metadata=dev
    )
    await vault.secrets.DeleteSecret(
        ss.DeleteSecretRequest(action="ship", key="TOKEN"), metadata=dev
    )
    await rpc_error(
        vault.secrets.DeleteSecret(ss.DeleteSecretRequest(action="ship", key="TOKEN"), metadata=dev)
    )


async def events(vault: VaultServer, metadata: Metadata, **filters: object) -> list[au.AuditEvent]:
    response = await vault.audit.ListAuditEvents(
        au.ListAuditEventsRequest(**filters),
        metadata=metadata,
    )
    return list(response.events)


async def test_an_admin_reads_every_operation_newest_first(
    vault: VaultServer, tenant: Tenant, resolver: resolver_grpc.SecretResolverServiceStub
) -> None:
    await activity(vault, tenant, resolver)
    found = await events(vault, tenant.metadata("admin"))
    assert [(e.operation, e.outcome, e.action, e.key) for e in found] == [
        (au.AUDIT_OPERATION_DELETE_SECRET, au.AUDIT_OUTCOME_NOT_FOUND, "ship", "TOKEN"),
        (au.AUDIT_OPERATION_DELETE_SECRET, au.AUDIT_OUTCOME_OK, "ship", "TOKEN"),
        (au.AUDIT_OPERATION_PURGE_SECRET_VERSIONS, au.AUDIT_OUTCOME_OK, "score", "RISK"),
        (au.AUDIT_OPERATION_RESOLVE, au.AUDIT_OUTCOME_OK, "score", "RISK"),
        (au.AUDIT_OPERATION_SET_SECRET, au.AUDIT_OUTCOME_OK, "ship", "TOKEN"),
        (au.AUDIT_OPERATION_SET_SECRET, au.AUDIT_OUTCOME_OK, "score", "RISK"),
    ]
    assert all(e.organization_id == tenant.org and e.create_time.seconds for e in found)
    callers = {e.caller for e in found}
    assert "service:executor" in callers and len(callers) == 2  # the developer key and the executor
    assert found[1].detail == "1 version(s) destroyed"


async def test_filters_and_pages(
    vault: VaultServer, tenant: Tenant, resolver: resolver_grpc.SecretResolverServiceStub
) -> None:
    await activity(vault, tenant, resolver)
    admin = tenant.metadata("admin")
    assert {e.action for e in await events(vault, admin, action="score")} == {"score"}
    assert {e.key for e in await events(vault, admin, key="TOKEN")} == {"TOKEN"}
    resolves = await events(vault, admin, operation=au.AUDIT_OPERATION_RESOLVE)
    assert [e.operation for e in resolves] == [au.AUDIT_OPERATION_RESOLVE]
    seen: list[int] = []
    token = ""
    while True:
        page = await vault.audit.ListAuditEvents(
            au.ListAuditEventsRequest(page_size=4, page_token=token), metadata=admin
        )
        seen.extend(e.id for e in page.events)
        token = page.next_page_token
        if not token:
            break
    assert seen == [e.id for e in await events(vault, admin)] and len(seen) == 6
    error = await rpc_error(
        vault.audit.ListAuditEvents(au.ListAuditEventsRequest(operation=99), metadata=admin)
    )
    assert violation_fields(error) == ["operation"]


@pytest.mark.parametrize("role", ["viewer", "developer"])
async def test_only_admins_read_the_audit_log(
    vault: VaultServer, tenant: Tenant, role: str
) -> None:
    error = await rpc_error(
        vault.audit.ListAuditEvents(au.ListAuditEventsRequest(), metadata=tenant.metadata(role))
    )
    assert (error.code, error.reason) == (grpc.StatusCode.PERMISSION_DENIED, "ROLE_TOO_LOW")


async def test_another_organizations_admin_sees_nothing(
    vault: VaultServer,
    tenant: Tenant,
    other_tenant: Tenant,
    resolver: resolver_grpc.SecretResolverServiceStub,
) -> None:
    await activity(vault, tenant, resolver)
    intruder = other_tenant.metadata("admin")
    assert await events(vault, intruder) == []
    error = await rpc_error(
        vault.audit.ListAuditEvents(
            au.ListAuditEventsRequest(organization_id=tenant.org), metadata=intruder
        )
    )
    assert error.reason == "ORGANIZATION_NOT_ALLOWED"


async def test_the_operator_reads_any_organization(
    vault: VaultServer,
    tenant: Tenant,
    operator: Metadata,
    resolver: resolver_grpc.SecretResolverServiceStub,
) -> None:
    await activity(vault, tenant, resolver)
    assert len(await events(vault, operator, organization_id=tenant.org)) == 6


async def test_the_audit_log_is_append_only(
    vault: VaultServer, tenant: Tenant, resolver: resolver_grpc.SecretResolverServiceStub
) -> None:
    await activity(vault, tenant, resolver)
    for statement in (
        "UPDATE vault.audit_events SET caller = 'someone else'",
        "DELETE FROM vault.audit_events",
        "TRUNCATE vault.audit_events",
    ):
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            await vault.sql(statement)
    assert len(await events(vault, tenant.metadata("admin"))) == 6
