"""Workflow state changes reach the compacted Kafka topic (the registry's contract
with the orchestrator and governance; record format in workflow_state.proto)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

from eventflow.registry.v1 import workflow_pb2 as wf
from eventflow.registry.v1 import workflow_service_pb2 as api
from eventflow.registry.v1 import workflow_state_pb2
from google.protobuf.field_mask_pb2 import FieldMask

from libs.bus import KafkaBus, Record
from libs.bus import topics as bus_topics
from tests.conftest import Tenant
from tests.integration.helpers import action, workflow


class StateReader:
    """Reads the state topic as the orchestrator will: a consumer group from the start."""

    def __init__(self, bootstrap: str) -> None:
        self.bus = KafkaBus(bootstrap)
        self.records: list[Record] = []

    async def __aenter__(self) -> StateReader:
        await self.bus.start()

        async def handle(batch: Sequence[Record]) -> None:
            self.records.extend(batch)

        self.bus.subscribe(
            [bus_topics.REGISTRY_WORKFLOWS], f"reader-{uuid.uuid4().hex[:8]}", handle
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.bus.stop()

    def states(self, workflow_id: str) -> list[workflow_state_pb2.WorkflowState]:
        return [
            workflow_state_pb2.WorkflowState.FromString(r.value)
            for r in self.records
            if r.key == workflow_id.encode() and r.value is not None
        ]

    async def wait_for(
        self, workflow_id: str, count: int
    ) -> list[workflow_state_pb2.WorkflowState]:
        for _ in range(600):
            found = self.states(workflow_id)
            if len(found) >= count:
                return found
            await asyncio.sleep(0.05)
        raise AssertionError(f"expected {count} state records, got {len(self.states(workflow_id))}")


async def test_publish_and_status_changes_are_published_in_order(
    tenant: Tenant, kafka_bootstrap: str
) -> None:
    dev = tenant.metadata("developer")
    created = await tenant.workflows.CreateWorkflow(
        api.CreateWorkflowRequest(project_id=tenant.project, workflow=workflow()), metadata=dev
    )
    wf_id = created.workflow.id
    async with StateReader(kafka_bootstrap) as reader:
        await tenant.workflows.PublishWorkflow(api.PublishWorkflowRequest(id=wf_id), metadata=dev)
        await tenant.workflows.PublishWorkflow(api.PublishWorkflowRequest(id=wf_id), metadata=dev)
        await tenant.workflows.DisableWorkflow(api.DisableWorkflowRequest(id=wf_id), metadata=dev)
        await tenant.workflows.ArchiveWorkflow(api.ArchiveWorkflowRequest(id=wf_id), metadata=dev)
        states = await reader.wait_for(wf_id, 4)
        await asyncio.sleep(0.5)
        states = reader.states(wf_id)
        record = next(r for r in reader.records if r.key == wf_id.encode())
    # UNCHANGED publishes nothing; every real change is one record.
    assert [s.status for s in states] == ["draft", "active", "paused", "archived"]
    assert [s.revision for s in states] == sorted({s.revision for s in states})
    assert not states[0].HasField("published")
    first = states[1]
    assert (first.organization_id, first.project_id, first.environment) == (
        tenant.org,
        tenant.project,
        "production",
    )
    assert first.published.version == 1
    assert first.published.definition.trigger_event == "user.signed_up"
    assert [s.type for s in first.published.definition.steps] == [
        "custom_action",
        "delay",
        "webhook",
    ]
    assert record.header("content-type") == b"application/x-protobuf"


async def test_draft_edits_carry_the_draft_and_keep_the_published_version(
    tenant: Tenant, kafka_bootstrap: str
) -> None:
    dev = tenant.metadata("developer")
    async with StateReader(kafka_bootstrap) as reader:
        created = await tenant.workflows.CreateWorkflow(
            api.CreateWorkflowRequest(project_id=tenant.project, workflow=workflow()), metadata=dev
        )
        wf_id = created.workflow.id
        await tenant.workflows.PublishWorkflow(api.PublishWorkflowRequest(id=wf_id), metadata=dev)
        await tenant.workflows.UpdateWorkflow(
            api.UpdateWorkflowRequest(
                workflow=wf.Workflow(id=wf_id, steps=[action("other-action")]),
                update_mask=FieldMask(paths=["steps"]),
            ),
            metadata=dev,
        )
        states = await reader.wait_for(wf_id, 3)
    edited = states[2]
    assert edited.status == "active"
    assert [s.action for s in edited.draft.steps] == ["other-action"]
    assert edited.published.version == 1
    assert [s.action for s in edited.published.definition.steps if s.action] == ["score-order"]


async def test_deleting_a_draft_publishes_a_tombstone(tenant: Tenant, kafka_bootstrap: str) -> None:
    dev = tenant.metadata("developer")
    async with StateReader(kafka_bootstrap) as reader:
        created = await tenant.workflows.CreateWorkflow(
            api.CreateWorkflowRequest(project_id=tenant.project, workflow=workflow()), metadata=dev
        )
        wf_id = created.workflow.id
        await tenant.workflows.DeleteWorkflow(api.DeleteWorkflowRequest(id=wf_id), metadata=dev)
        for _ in range(600):
            mine = [r for r in reader.records if r.key == wf_id.encode()]
            if len(mine) == 2:
                break
            await asyncio.sleep(0.05)
    assert [r.value is None for r in mine] == [False, True]
