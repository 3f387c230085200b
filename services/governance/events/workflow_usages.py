"""Keeps the usages read model from the registry's workflow state topic.

Governance never reads the registry's tables: it learns every workflow's
draft and published steps from ``eventflow.registry.workflows``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from eventflow.registry.v1 import workflow_pb2, workflow_state_pb2
from psycopg_pool import AsyncConnectionPool

from libs.bus import Bus, Record, Subscription
from libs.bus import topics as bus_topics
from services.governance.storage import usages

GROUP = "governance-usages"


def action_refs(definition: workflow_pb2.WorkflowDefinition) -> list[str]:
    return sorted({s.action for s in definition.steps if s.type == "custom_action" and s.action})


def usage_from(state: workflow_state_pb2.WorkflowState) -> usages.UsageRow:
    published = state.published.definition if state.HasField("published") else None
    return usages.UsageRow(
        workflow_id=uuid.UUID(state.workflow_id),
        organization_id=state.organization_id,
        project_id=state.project_id,
        workflow_name=state.draft.name or (published.name if published else ""),
        workflow_status=state.status,
        draft_refs=action_refs(state.draft),
        published_refs=action_refs(published) if published else [],
        revision=state.revision,
    )


class UsageTracker:
    def __init__(self, pool: AsyncConnectionPool, bus: Bus) -> None:
        self._pool = pool
        self._bus = bus
        self._subscription: Subscription | None = None

    def start(self) -> None:
        self._subscription = self._bus.subscribe([bus_topics.REGISTRY_WORKFLOWS], GROUP, self.apply)

    async def stop(self) -> None:
        if self._subscription is not None:
            await self._subscription.stop()

    async def apply(self, batch: Sequence[Record]) -> None:
        """One transaction per batch; the bus commits offsets only after it."""
        async with self._pool.connection() as conn, conn.transaction():
            for record in batch:
                if record.key is None:
                    continue
                if record.value is None:
                    await usages.remove(conn, uuid.UUID(record.key.decode()))
                else:
                    state = workflow_state_pb2.WorkflowState.FromString(record.value)
                    await usages.upsert(conn, usage_from(state))
