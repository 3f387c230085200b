"""Workflow use cases: each one a transaction over storage, rules from domain/.

Every change of a workflow (draft edits, publish, enable, disable, archive,
delete) writes a ``WorkflowState`` record (or a tombstone) to the outbox in
the same transaction, so the state topic never misses or invents a change.
Webhook signing secrets never go on the bus: the orchestrator asks for them
over the internal listener.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from eventflow.registry.v1 import workflow_state_pb2

from libs.auth import Principal
from libs.errors import invalid_field, not_found
from libs.outbox import enqueue
from libs.pagination import decode_token, encode_token, page_size
from libs.timestamps import timestamp
from services.registry import errors
from services.registry.api.convert import definition_proto, version_proto
from services.registry.domain import lifecycle
from services.registry.domain.canonical import Change, definition_hash, diff
from services.registry.domain.definition import normalize_definition
from services.registry.domain.tenancy import check_environment_allowed, project_for
from services.registry.domain.webhook_secrets import new_signing_secret, valid_secrets
from services.registry.events.state_topic import state_record, tombstone
from services.registry.storage import SCHEMA
from services.registry.storage.tenancy import TenancyStore
from services.registry.storage.webhook_secrets import WebhookSecretStore
from services.registry.storage.workflows import (
    Conn,
    VersionRow,
    WorkflowFilter,
    WorkflowRow,
    WorkflowStore,
)

MAX_MESSAGE = 500
UPDATABLE_PATHS = ("name", "trigger_event", "environment", "steps", "reentry")


@dataclass(frozen=True)
class WorkflowView:
    """A workflow with the hash of its latest version (to tell unpublished edits)."""

    row: WorkflowRow
    published_hash: str | None


@dataclass(frozen=True)
class CreatedWorkflow(WorkflowView):
    """A new workflow and its webhook signing secret, which is shown this once."""

    signing_secret: str = field(repr=False)


@dataclass(frozen=True)
class PublishResult:
    published: bool
    version: VersionRow
    workflow: WorkflowView


@dataclass(frozen=True)
class Preview:
    base_version: int
    draft_hash: str
    changes: list[Change]


class WorkflowCatalog:
    def __init__(
        self,
        store: WorkflowStore,
        tenancy: TenancyStore,
        secrets: WebhookSecretStore,
        on_commit: Callable[[], None],
    ) -> None:
        self._store = store
        self._tenancy = tenancy
        self._secrets = secrets
        # Wakes the outbox relay once a state change has committed.
        self._on_commit = on_commit

    async def create(self, who: Principal, project_id: str, raw: dict[str, Any]) -> CreatedWorkflow:
        org = _org(who)
        project = project_for(who, project_id)
        assert project is not None
        if await self._tenancy.get_project(org, project) is None:
            raise not_found("project", project)
        draft = normalize_definition(raw)
        await self._check_plan(org, draft["environment"])
        secret = new_signing_secret()
        async with self._store.transaction() as conn:
            row = await self._store.insert(conn, org, project, draft, definition_hash(draft))
            await self._secrets.insert(conn, row.id, secret)
            await self._enqueue_state(conn, row, None)
        self._on_commit()
        return CreatedWorkflow(row, None, secret)

    async def rotate_signing_secret(self, who: Principal, workflow_id: str) -> str:
        """A new webhook signing secret; the old one stays valid for the grace period."""
        secret = new_signing_secret()
        async with self._store.transaction() as conn:
            row = await self._load(conn, who, workflow_id)
            await self._secrets.rotate(conn, row.id, secret)
        return secret

    async def signing_secrets(self, workflow_id: str) -> list[str]:
        """The secrets a webhook of this workflow is signed with now, current first.

        For the orchestrator (a service, not a tenant), so not scoped to one.
        """
        ident = _workflow_uuid(workflow_id, "workflow_id")
        async with self._store.transaction() as conn:
            found = await self._secrets.get(conn, ident)
        if found is None:
            raise not_found("workflow", workflow_id)
        return valid_secrets(
            found.secret, found.previous_secret, found.rotate_time, datetime.now(UTC)
        )

    async def get(self, who: Principal, workflow_id: str) -> WorkflowView:
        async with self._store.transaction() as conn:
            row = await self._load(conn, who, workflow_id)
            return await self._view(conn, row)

    async def list_workflows(
        self,
        who: Principal,
        project_id: str,
        filters: dict[str, str],
        size: int,
        token: str,
    ) -> tuple[list[WorkflowView], str]:
        where = WorkflowFilter(
            organization_id=_org(who),
            project_id=project_for(who, project_id, required=False),
            **filters,
        )
        if where.environment == "sandbox":
            await self._check_plan(where.organization_id, "sandbox")
        limit = page_size(size)
        cursor = decode_token(token, ("t", "id"))
        after = (cursor["t"], cursor["id"]) if cursor else None
        async with self._store.transaction() as conn:
            rows = await self._store.list_workflows(conn, where, after, limit + 1)
            views = [await self._view(conn, r) for r in rows[:limit]]
        next_token = ""
        if len(rows) > limit:
            last = rows[limit - 1]
            next_token = encode_token({"t": last.create_time.isoformat(), "id": str(last.id)})
        return views, next_token

    async def update(
        self, who: Principal, workflow_id: str, raw: dict[str, Any], paths: list[str]
    ) -> WorkflowView:
        for i, path in enumerate(paths):
            if path not in UPDATABLE_PATHS:
                raise invalid_field(
                    f"update_mask.paths[{i}]",
                    f"cannot update {path!r}; updatable: {', '.join(UPDATABLE_PATHS)}",
                )
        async with self._store.transaction() as conn:
            row = await self._load(conn, who, workflow_id, lock=True)
            lifecycle.check_editable(row.status, workflow_id)
            merged = dict(row.draft)
            for path in paths or UPDATABLE_PATHS:
                merged[path] = raw.get(path)
            draft = normalize_definition(merged)
            if draft["environment"] != row.draft["environment"]:
                if row.published_version:
                    raise errors.environment_locked(workflow_id)
                await self._check_plan(row.organization_id, draft["environment"])
            row = await self._store.save_draft(conn, row.id, draft, definition_hash(draft))
            view = await self._view(conn, row)
            await self._enqueue_state(conn, row, await self._latest(conn, row))
        self._on_commit()
        return view

    async def delete(self, who: Principal, workflow_id: str) -> None:
        async with self._store.transaction() as conn:
            row = await self._load(conn, who, workflow_id, lock=True)
            lifecycle.check_deletable(row.status, workflow_id)
            await self._store.delete(conn, row.id)
            await enqueue(conn, SCHEMA, *tombstone(str(row.id)))
        self._on_commit()

    async def publish(self, who: Principal, workflow_id: str, message: str) -> PublishResult:
        async with self._store.transaction() as conn:
            row = await self._load(conn, who, workflow_id, lock=True)
            status = lifecycle.after_publish(row.status, workflow_id)
            # Re-validate: the rules may have tightened since the draft was saved.
            draft = normalize_definition(row.draft)
            draft_hash = definition_hash(draft)
            latest = await self._latest(conn, row)
            if latest is not None and latest.definition_hash == draft_hash:
                return PublishResult(False, latest, WorkflowView(row, latest.definition_hash))
            version = await self._store.insert_version(
                conn,
                row.id,
                row.published_version + 1,
                draft,
                draft_hash,
                message.strip()[:MAX_MESSAGE],
                who.key_id,
            )
            row = await self._store.set_state(conn, row.id, status, version.version)
            await self._enqueue_state(conn, row, version)
        self._on_commit()
        return PublishResult(True, version, WorkflowView(row, draft_hash))

    async def preview(self, who: Principal, workflow_id: str) -> Preview:
        async with self._store.transaction() as conn:
            row = await self._load(conn, who, workflow_id)
            latest = await self._latest(conn, row)
        before = latest.definition if latest else {}
        return Preview(latest.version if latest else 0, row.draft_hash, diff(before, row.draft))

    async def versions(
        self, who: Principal, workflow_id: str, size: int, token: str
    ) -> tuple[list[VersionRow], str]:
        limit = page_size(size)
        cursor = decode_token(token, ("before",))
        async with self._store.transaction() as conn:
            row = await self._load(conn, who, workflow_id)
            rows = await self._store.list_versions(
                conn, row.id, cursor["before"] if cursor else None, limit + 1
            )
        next_token = encode_token({"before": rows[limit - 1].version}) if len(rows) > limit else ""
        return rows[:limit], next_token

    async def version(self, who: Principal, workflow_id: str, number: int) -> VersionRow:
        async with self._store.transaction() as conn:
            row = await self._load(conn, who, workflow_id)
            found = await self._store.get_version(conn, row.id, number)
        if found is None:
            raise not_found("version", f"{workflow_id}@{number}")
        return found

    async def enable(self, who: Principal, workflow_id: str) -> WorkflowView:
        return await self._transition(who, workflow_id, lifecycle.after_enable)

    async def disable(self, who: Principal, workflow_id: str) -> WorkflowView:
        return await self._transition(who, workflow_id, lifecycle.after_disable)

    async def archive(self, who: Principal, workflow_id: str) -> WorkflowView:
        return await self._transition(who, workflow_id, lifecycle.after_archive)

    async def _transition(
        self, who: Principal, workflow_id: str, rule: Callable[[str, str], str]
    ) -> WorkflowView:
        async with self._store.transaction() as conn:
            row = await self._load(conn, who, workflow_id, lock=True)
            status = rule(row.status, workflow_id)
            if status == row.status:
                return await self._view(conn, row)
            row = await self._store.set_state(conn, row.id, status, row.published_version)
            await self._enqueue_state(conn, row, await self._latest(conn, row))
            view = await self._view(conn, row)
        self._on_commit()
        return view

    async def _load(
        self, conn: Conn, who: Principal, workflow_id: str, *, lock: bool = False
    ) -> WorkflowRow:
        ident = _workflow_uuid(workflow_id, "id")
        row = await self._store.get(conn, _org(who), ident, lock=lock)
        # Another project's workflow is reported exactly like a missing one.
        if row is None or (who.project_id and row.project_id != who.project_id):
            raise not_found("workflow", workflow_id)
        # A downgrade to starter keeps sandbox workflows, but every call on
        # one is refused until the plan has a sandbox again.
        if row.draft["environment"] == "sandbox":
            await self._check_plan(row.organization_id, "sandbox")
        return row

    async def _latest(self, conn: Conn, row: WorkflowRow) -> VersionRow | None:
        if not row.published_version:
            return None
        return await self._store.get_version(conn, row.id, row.published_version)

    async def _view(self, conn: Conn, row: WorkflowRow) -> WorkflowView:
        latest = await self._latest(conn, row)
        return WorkflowView(row, latest.definition_hash if latest else None)

    async def _check_plan(self, org_id: str, environment: str) -> None:
        org = await self._tenancy.get_organization(org_id)
        if org is None:
            raise not_found("organization", org_id)
        check_environment_allowed(org.plan, environment)

    async def _enqueue_state(
        self, conn: Conn, row: WorkflowRow, version: VersionRow | None
    ) -> None:
        state = workflow_state_pb2.WorkflowState(
            workflow_id=str(row.id),
            organization_id=row.organization_id,
            project_id=row.project_id,
            environment=row.draft["environment"],
            status=row.status,
            revision=row.revision,
            change_time=timestamp(row.update_time),
            draft=definition_proto(row.draft),
        )
        if version is not None:
            state.published.CopyFrom(version_proto(version))
            state.environment = version.definition["environment"]
        await enqueue(conn, SCHEMA, *state_record(state))


def _org(who: Principal) -> str:
    if who.organization_id is None:
        raise errors.project_not_allowed("*")
    return who.organization_id


def _workflow_uuid(workflow_id: str, field_path: str) -> uuid.UUID:
    try:
        return uuid.UUID(workflow_id)
    except ValueError:
        raise invalid_field(field_path, "must be a workflow UUID") from None
