"""Keeps the orchestrator's read models from the registry's compacted topics.

`eventflow.registry.workflows` -> active workflow versions (what events
start); `eventflow.registry.tenants` -> known projects and their plans (what
ingest accepts). One consumer group per topic: replicas share one table, so
each record needs applying once.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from eventflow.registry.v1 import tenant_state_pb2, workflow_pb2, workflow_state_pb2
from google.protobuf import json_format
from psycopg_pool import AsyncConnectionPool

from libs.bus import Bus, Record, Subscription
from libs.bus import topics as bus_topics
from libs.db import transaction
from services.orchestrator.storage import instances, read_models

WORKFLOWS_GROUP = "orchestrator-workflows"
TENANTS_GROUP = "orchestrator-tenants"


class RegistryFeeds:
    def __init__(self, pool: AsyncConnectionPool, bus: Bus) -> None:
        self._pool = pool
        self._bus = bus
        self._subscriptions: list[Subscription] = []

    def start(self) -> None:
        self._subscriptions = [
            self._bus.subscribe([bus_topics.REGISTRY_WORKFLOWS], WORKFLOWS_GROUP, self.workflows),
            self._bus.subscribe([bus_topics.REGISTRY_TENANTS], TENANTS_GROUP, self.tenants),
        ]

    async def stop(self) -> None:
        for subscription in self._subscriptions:
            await subscription.stop()

    async def workflows(self, batch: Sequence[Record]) -> None:
        async with transaction(self._pool) as conn:
            for record in batch:
                if record.key is None:
                    continue
                workflow_id = uuid.UUID(record.key.decode())
                if record.value is None:
                    await read_models.remove_workflow(conn, workflow_id)
                    continue
                state = workflow_state_pb2.WorkflowState.FromString(record.value)
                published = state.published if state.HasField("published") else None
                definition = _as_dict(published.definition) if published else None
                draft = _as_dict(state.draft) if state.HasField("draft") else None
                await read_models.apply_workflow(
                    conn,
                    workflow_id,
                    state.organization_id,
                    state.project_id,
                    state.environment,
                    state.status,
                    published.version if published else None,
                    _normalized(definition),
                    state.revision,
                    _normalized(draft),
                )
                if state.status == "active":
                    await _resume_held_runs(conn, workflow_id)

    async def tenants(self, batch: Sequence[Record]) -> None:
        async with transaction(self._pool) as conn:
            for record in batch:
                if record.value is None:
                    continue
                state = tenant_state_pb2.TenantState.FromString(record.value)
                await read_models.apply_tenant(
                    conn, state.organization_id, state.project_id, state.plan, state.revision
                )


async def _resume_held_runs(conn: read_models.Conn, workflow_id: uuid.UUID) -> None:
    """Instances held because the workflow was disabled continue once it is enabled."""
    await instances.transition_many(
        conn,
        "workflow_id = %s AND status = 'paused' AND pause_reason = 'workflow'",
        (workflow_id,),
        {"status": "running", "pause_reason": None},
        "instance_resumed",
        {"by": "workflow"},
    )


def _as_dict(definition: workflow_pb2.WorkflowDefinition) -> dict:
    return json_format.MessageToDict(definition, preserving_proto_field_name=True)


def _normalized(definition: dict | None) -> dict | None:
    """Protobuf JSON spells int64 as strings; the runner wants numbers."""
    if definition is None:
        return None
    for step in definition.get("steps", []):
        if "duration_ms" in step:
            step["duration_ms"] = int(step["duration_ms"])
    return definition
