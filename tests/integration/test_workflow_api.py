"""The WorkflowService over real gRPC on a real PostgreSQL (SPEC §4)."""

from __future__ import annotations

import grpc
from eventflow.registry.v1 import workflow_pb2 as wf
from eventflow.registry.v1 import workflow_service_pb2 as api
from google.protobuf.field_mask_pb2 import FieldMask

from tests.conftest import Tenant
from tests.integration.helpers import (
    action,
    delay,
    rpc_error,
    violation_fields,
    webhook,
    workflow,
)


async def create(tenant: Tenant, definition: wf.Workflow | None = None) -> wf.Workflow:
    response = await tenant.workflows.CreateWorkflow(
        api.CreateWorkflowRequest(project_id=tenant.project, workflow=definition or workflow()),
        metadata=tenant.metadata("developer"),
    )
    return response.workflow


async def publish(
    tenant: Tenant, workflow_id: str, message: str = ""
) -> api.PublishWorkflowResponse:
    return await tenant.workflows.PublishWorkflow(
        api.PublishWorkflowRequest(id=workflow_id, message=message),
        metadata=tenant.metadata("developer"),
    )


async def get(tenant: Tenant, workflow_id: str) -> wf.Workflow:
    response = await tenant.workflows.GetWorkflow(
        api.GetWorkflowRequest(id=workflow_id), metadata=tenant.metadata("viewer")
    )
    return response.workflow


async def test_create_returns_a_draft_with_defaults_filled_in(tenant: Tenant) -> None:
    created = await create(tenant)
    assert created.status == "draft"
    assert created.published_version == 0
    assert created.environment == "production"
    assert created.reentry.mode == "always" and created.reentry.cooldown_minutes == 60
    first, second, third = created.steps
    assert (first.retry.max_attempts, first.retry.backoff_delay_ms) == (3, 5000)
    assert first.retry.backoff == "exponential" and first.retry.timeout_ms == 30000
    assert (third.retry.max_attempts, third.retry.backoff_delay_ms) == (5, 10000)
    assert third.method == "POST"
    assert second.duration_ms == 60_000
    assert created.organization_id == tenant.org and created.project_id == tenant.project
    assert (await get(tenant, created.id)) == created


async def test_unsupported_step_type_is_rejected_naming_the_field(tenant: Tenant) -> None:
    bad = workflow(steps=[action(), delay(), wf.Step(type="projection_write")])
    error = await rpc_error(
        tenant.workflows.CreateWorkflow(
            api.CreateWorkflowRequest(project_id=tenant.project, workflow=bad),
            metadata=tenant.metadata("developer"),
        )
    )
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.violations[0].field == "steps[2].type"
    assert error.violations[0].description == "unsupported step type: projection_write"


async def test_every_bad_field_is_reported_and_nothing_is_stored(tenant: Tenant) -> None:
    bad = wf.Workflow(
        name="",
        trigger_event="User Signed Up",
        environment="staging",
        steps=[
            action(retry=wf.RetryPolicy(max_attempts=11)),
            webhook("ftp://files.example.com", retry=wf.RetryPolicy(backoff_delay_ms=999)),
            delay(500),
            wf.Step(type="delay", duration_ms=2000, url="https://x.example.com"),
        ],
        reentry=wf.Reentry(mode="sometimes"),
    )
    error = await rpc_error(
        tenant.workflows.CreateWorkflow(
            api.CreateWorkflowRequest(project_id=tenant.project, workflow=bad),
            metadata=tenant.metadata("developer"),
        )
    )
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert set(violation_fields(error)) == {
        "name",
        "trigger_event",
        "environment",
        "steps[0].retry.max_attempts",
        "steps[1].url",
        "steps[1].retry.backoff_delay_ms",
        "steps[2].duration_ms",
        "steps[3].url",
        "reentry.mode",
    }
    listed = await tenant.workflows.ListWorkflows(
        api.ListWorkflowsRequest(project_id=tenant.project), metadata=tenant.metadata("viewer")
    )
    assert list(listed.workflows) == []


async def test_publish_writes_version_one_and_activates(tenant: Tenant) -> None:
    created = await create(tenant)
    published = await publish(tenant, created.id, "  first release  ")
    assert published.outcome == api.PUBLISH_OUTCOME_PUBLISHED
    assert published.version.version == 1
    assert published.version.message == "first release"
    assert len(published.version.definition_hash) == 64
    assert published.workflow.status == "active"
    assert published.workflow.published_version == 1
    assert not published.workflow.has_unpublished_changes


async def test_republishing_an_unchanged_draft_is_a_typed_unchanged_outcome(tenant: Tenant) -> None:
    created = await create(tenant)
    first = await publish(tenant, created.id)
    again = await publish(tenant, created.id, "nothing new")
    assert again.outcome == api.PUBLISH_OUTCOME_UNCHANGED
    assert again.version == first.version
    versions = await tenant.workflows.ListWorkflowVersions(
        api.ListWorkflowVersionsRequest(workflow_id=created.id), metadata=tenant.metadata("viewer")
    )
    assert [v.version for v in versions.versions] == [1]


async def test_editing_changes_the_draft_not_the_published_version(tenant: Tenant) -> None:
    created = await create(tenant)
    await publish(tenant, created.id)
    edited = wf.Workflow(id=created.id, name="Welcome v2", steps=[webhook("https://a.example.com")])
    updated = await tenant.workflows.UpdateWorkflow(
        api.UpdateWorkflowRequest(workflow=edited, update_mask=FieldMask(paths=["name", "steps"])),
        metadata=tenant.metadata("developer"),
    )
    assert updated.workflow.name == "Welcome v2"
    assert updated.workflow.trigger_event == "user.signed_up"  # not in the mask: kept
    assert updated.workflow.has_unpublished_changes
    assert updated.workflow.published_version == 1
    v1 = await tenant.workflows.GetWorkflowVersion(
        api.GetWorkflowVersionRequest(workflow_id=created.id, version=1),
        metadata=tenant.metadata("viewer"),
    )
    assert v1.version.definition.name == "Welcome"
    assert len(v1.version.definition.steps) == 3
    second = await publish(tenant, created.id)
    assert second.outcome == api.PUBLISH_OUTCOME_PUBLISHED and second.version.version == 2


async def test_update_rejects_unknown_mask_paths_and_bad_values_without_changing_anything(
    tenant: Tenant,
) -> None:
    created = await create(tenant)
    error = await rpc_error(
        tenant.workflows.UpdateWorkflow(
            api.UpdateWorkflowRequest(
                workflow=wf.Workflow(id=created.id, status="active"),
                update_mask=FieldMask(paths=["status"]),
            ),
            metadata=tenant.metadata("developer"),
        )
    )
    assert violation_fields(error) == ["update_mask.paths[0]"]
    error = await rpc_error(
        tenant.workflows.UpdateWorkflow(
            api.UpdateWorkflowRequest(
                workflow=wf.Workflow(id=created.id, steps=[wf.Step(type="sleep")]),
                update_mask=FieldMask(paths=["steps"]),
            ),
            metadata=tenant.metadata("developer"),
        )
    )
    assert violation_fields(error) == ["steps[0].type"]
    assert (await get(tenant, created.id)) == created


async def test_preview_lists_the_changes_since_the_latest_version(tenant: Tenant) -> None:
    created = await create(tenant)
    preview = await tenant.workflows.PreviewPublish(
        api.PreviewPublishRequest(id=created.id), metadata=tenant.metadata("viewer")
    )
    assert preview.base_version == 0 and not preview.unchanged
    await publish(tenant, created.id)
    steps = list(created.steps)
    steps[2] = webhook("https://new.example.com/hook")
    await tenant.workflows.UpdateWorkflow(
        api.UpdateWorkflowRequest(
            workflow=wf.Workflow(id=created.id, steps=steps, reentry=wf.Reentry(mode="once")),
            update_mask=FieldMask(paths=["steps", "reentry"]),
        ),
        metadata=tenant.metadata("developer"),
    )
    preview = await tenant.workflows.PreviewPublish(
        api.PreviewPublishRequest(id=created.id), metadata=tenant.metadata("viewer")
    )
    assert preview.base_version == 1 and not preview.unchanged
    changes = {c.path: (c.kind, c.before, c.after) for c in preview.changes}
    assert changes == {
        "reentry.mode": ("changed", '"always"', '"once"'),
        "steps[2].url": (
            "changed",
            '"https://hooks.example.com/in"',
            '"https://new.example.com/hook"',
        ),
    }
    await publish(tenant, created.id)
    preview = await tenant.workflows.PreviewPublish(
        api.PreviewPublishRequest(id=created.id), metadata=tenant.metadata("viewer")
    )
    assert preview.unchanged and preview.base_version == 2 and not preview.changes


async def test_enable_disable_archive_lifecycle(tenant: Tenant) -> None:
    created = await create(tenant)
    dev = tenant.metadata("developer")
    error = await rpc_error(
        tenant.workflows.EnableWorkflow(api.EnableWorkflowRequest(id=created.id), metadata=dev)
    )
    assert error.code == grpc.StatusCode.FAILED_PRECONDITION
    assert error.reason == "WORKFLOW_NOT_PUBLISHED"
    await publish(tenant, created.id)
    disabled = await tenant.workflows.DisableWorkflow(
        api.DisableWorkflowRequest(id=created.id), metadata=dev
    )
    assert disabled.workflow.status == "paused"
    enabled = await tenant.workflows.EnableWorkflow(
        api.EnableWorkflowRequest(id=created.id), metadata=dev
    )
    assert enabled.workflow.status == "active"
    archived = await tenant.workflows.ArchiveWorkflow(
        api.ArchiveWorkflowRequest(id=created.id), metadata=dev
    )
    assert archived.workflow.status == "archived"
    for call in (
        tenant.workflows.EnableWorkflow(api.EnableWorkflowRequest(id=created.id), metadata=dev),
        tenant.workflows.PublishWorkflow(api.PublishWorkflowRequest(id=created.id), metadata=dev),
        tenant.workflows.UpdateWorkflow(
            api.UpdateWorkflowRequest(workflow=wf.Workflow(id=created.id, name="again")),
            metadata=dev,
        ),
    ):
        error = await rpc_error(call)
        assert (error.code, error.reason) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            "WORKFLOW_ARCHIVED",
        )


async def test_publishing_a_paused_workflow_keeps_it_paused(tenant: Tenant) -> None:
    created = await create(tenant)
    await publish(tenant, created.id)
    await tenant.workflows.DisableWorkflow(
        api.DisableWorkflowRequest(id=created.id), metadata=tenant.metadata("developer")
    )
    await tenant.workflows.UpdateWorkflow(
        api.UpdateWorkflowRequest(
            workflow=wf.Workflow(id=created.id, name="renamed"),
            update_mask=FieldMask(paths=["name"]),
        ),
        metadata=tenant.metadata("developer"),
    )
    published = await publish(tenant, created.id)
    assert published.version.version == 2 and published.workflow.status == "paused"


async def test_only_never_published_workflows_can_be_deleted(tenant: Tenant) -> None:
    dev = tenant.metadata("developer")
    draft = await create(tenant)
    await tenant.workflows.DeleteWorkflow(api.DeleteWorkflowRequest(id=draft.id), metadata=dev)
    error = await rpc_error(
        tenant.workflows.GetWorkflow(api.GetWorkflowRequest(id=draft.id), metadata=dev)
    )
    assert error.code == grpc.StatusCode.NOT_FOUND
    live = await create(tenant)
    await publish(tenant, live.id)
    error = await rpc_error(
        tenant.workflows.DeleteWorkflow(api.DeleteWorkflowRequest(id=live.id), metadata=dev)
    )
    assert (error.code, error.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_PUBLISHED")


async def test_environment_is_fixed_once_published(tenant: Tenant) -> None:
    created = await create(tenant)
    await publish(tenant, created.id)
    error = await rpc_error(
        tenant.workflows.UpdateWorkflow(
            api.UpdateWorkflowRequest(
                workflow=wf.Workflow(id=created.id, environment="sandbox"),
                update_mask=FieldMask(paths=["environment"]),
            ),
            metadata=tenant.metadata("developer"),
        )
    )
    assert error.reason == "ENVIRONMENT_LOCKED"


async def test_list_filters_and_paginates(tenant: Tenant) -> None:
    ids = []
    for i in range(5):
        trigger = "order.created" if i % 2 == 0 else "order.paid"
        env = "sandbox" if i == 4 else "production"
        created = await create(tenant, workflow(name=f"wf {i}", trigger=trigger, environment=env))
        ids.append(created.id)
    await publish(tenant, ids[0])

    async def listed(**kw: object) -> list[str]:
        out: list[str] = []
        token = ""
        while True:
            page = await tenant.workflows.ListWorkflows(
                api.ListWorkflowsRequest(project_id=tenant.project, page_token=token, **kw),
                metadata=tenant.metadata("viewer"),
            )
            out.extend(w.id for w in page.workflows)
            assert len(page.workflows) <= int(kw.get("page_size", 50))  # type: ignore[call-overload]
            token = page.next_page_token
            if not token:
                return out

    assert await listed(page_size=2) == ids
    assert await listed(trigger_event="order.created") == [ids[0], ids[2], ids[4]]
    assert await listed(environment="sandbox") == [ids[4]]
    assert await listed(status="active") == [ids[0]]
    assert await listed(status="draft", page_size=1) == ids[1:]
    error = await rpc_error(
        tenant.workflows.ListWorkflows(
            api.ListWorkflowsRequest(project_id=tenant.project, page_token="not-a-token"),
            metadata=tenant.metadata("viewer"),
        )
    )
    assert violation_fields(error) == ["page_token"]


async def test_versions_are_listed_newest_first_and_stay_readable(tenant: Tenant) -> None:
    created = await create(tenant)
    for i in range(3):
        await tenant.workflows.UpdateWorkflow(
            api.UpdateWorkflowRequest(
                workflow=wf.Workflow(id=created.id, name=f"name {i}"),
                update_mask=FieldMask(paths=["name"]),
            ),
            metadata=tenant.metadata("developer"),
        )
        await publish(tenant, created.id, f"release {i}")
    page = await tenant.workflows.ListWorkflowVersions(
        api.ListWorkflowVersionsRequest(workflow_id=created.id, page_size=2),
        metadata=tenant.metadata("viewer"),
    )
    assert [v.version for v in page.versions] == [3, 2]
    rest = await tenant.workflows.ListWorkflowVersions(
        api.ListWorkflowVersionsRequest(workflow_id=created.id, page_token=page.next_page_token),
        metadata=tenant.metadata("viewer"),
    )
    assert [(v.version, v.message, v.definition.name) for v in rest.versions] == [
        (1, "release 0", "name 0")
    ]
    error = await rpc_error(
        tenant.workflows.GetWorkflowVersion(
            api.GetWorkflowVersionRequest(workflow_id=created.id, version=9),
            metadata=tenant.metadata("viewer"),
        )
    )
    assert error.code == grpc.StatusCode.NOT_FOUND


async def test_publish_message_is_trimmed_to_500_characters(tenant: Tenant) -> None:
    created = await create(tenant)
    published = await publish(tenant, created.id, "x" * 800)
    assert published.version.message == "x" * 500


async def test_a_malformed_id_is_an_invalid_argument(tenant: Tenant) -> None:
    error = await rpc_error(
        tenant.workflows.GetWorkflow(
            api.GetWorkflowRequest(id="not-a-uuid"), metadata=tenant.metadata("viewer")
        )
    )
    assert (error.code, violation_fields(error)) == (grpc.StatusCode.INVALID_ARGUMENT, ["id"])
