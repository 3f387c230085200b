"""The registry's side of the compacted tenants topic (format: tenant_state.proto)."""

from __future__ import annotations

from eventflow.registry.v1 import tenant_state_pb2

from libs.bus import topics as bus_topics
from libs.bus.base import Headers

CONTENT_HEADERS: Headers = (
    ("content-type", b"application/x-protobuf"),
    ("ce_type", b"eventflow.registry.v1.TenantState"),
)


def tenant_key(organization_id: str, project_id: str) -> bytes:
    return f"{organization_id}/{project_id}".encode()


def tenant_record(state: tenant_state_pb2.TenantState) -> tuple[str, bytes, bytes, Headers]:
    """(topic, key, value, headers) of one project's tenant state."""
    return (
        bus_topics.REGISTRY_TENANTS,
        tenant_key(state.organization_id, state.project_id),
        state.SerializeToString(deterministic=True),
        CONTENT_HEADERS,
    )
