"""Action use cases: each one a transaction over storage, rules from domain/.

Every change of an action's runnable state (created, a review decision,
enabled, disabled, deleted) enqueues an ``ActionState`` record (or a
tombstone) in the same transaction.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from eventflow.executor.v1 import executor_service_pb2 as executor_pb

from libs.auth import Principal
from libs.errors import invalid_field, not_found
from libs.outbox import enqueue
from libs.pagination import decode_token, encode_token, page_size
from services.governance import errors
from services.governance.domain.actions import (
    APPROVED,
    MAX_MODULE_BYTES,
    validate_decision,
    validate_description,
    validate_name,
)
from services.governance.domain.permissions import parse_permissions
from services.governance.domain.signature import check_signature
from services.governance.events.action_state import state_record, tombstone
from services.governance.storage import SCHEMA, usages
from services.governance.storage.actions import ActionRow, ActionStore, Conn, ReviewRow, VersionRow

MAX_PAYLOAD_BYTES = 1024 * 1024


class Sandbox(Protocol):
    """What governance needs from the executor."""

    async def validate_module(self, wasm: bytes) -> executor_pb.ValidateModuleResponse: ...

    async def simulate(self, request: executor_pb.SimulateRequest) -> executor_pb.RunResult: ...


@dataclass(frozen=True)
class UploadHeader:
    name: str
    description: str
    permissions: str
    signature: str


@dataclass(frozen=True)
class ActionView:
    action: ActionRow
    latest_version: int
    current_version: int


@dataclass(frozen=True)
class UploadResult:
    created: bool
    action: ActionView
    version: VersionRow


class ActionCatalog:
    def __init__(self, store: ActionStore, sandbox: Sandbox, on_commit: Callable[[], None]) -> None:
        self._store = store
        self._sandbox = sandbox
        self._on_commit = on_commit

    async def upload(self, who: Principal, header: UploadHeader, module: bytes) -> UploadResult:
        org = _org(who)
        name = validate_name(header.name)
        description = validate_description(header.description)
        permissions = parse_permissions(header.permissions)
        if not module:
            raise errors.module_invalid("the module is empty")
        if len(module) > MAX_MODULE_BYTES:
            raise errors.module_invalid(f"the module is larger than {MAX_MODULE_BYTES} bytes")
        digest = hashlib.sha256(module).hexdigest()
        signature = check_signature(header.signature, digest)
        checked = await self._sandbox.validate_module(module)
        if not checked.valid:
            raise errors.module_invalid(checked.reason)
        async with self._store.transaction() as conn:
            action = await self._store.find(conn, org, name, lock=True)
            created_action = action is None
            if action is None:
                action = await self._store.create(conn, org, name, description)
            versions = await self._store.versions(conn, action.id)
            latest = versions[0] if versions else None
            if latest and latest.sha256 == digest and latest.permissions == permissions:
                return UploadResult(False, _view(action, versions), latest)
            version = await self._store.insert_version(
                conn,
                action.id,
                (latest.version if latest else 0) + 1,
                digest,
                module,
                permissions,
                who.key_id,
                signature.status,
                signature.key_fingerprint,
            )
            await self._store.record_review(
                conn, action.id, version.version, "", version.review_status, "", who.key_id
            )
            if description and description != action.description:
                action = await self._store.update(conn, action.id, description=description)
            if created_action:
                await self._enqueue_state(conn, action, [version, *versions])
        self._on_commit()
        return UploadResult(True, _view(action, [version, *versions]), version)

    async def get(self, who: Principal, ref: str) -> ActionView:
        async with self._store.transaction() as conn:
            action = await self._load(conn, who, ref)
            return _view(action, await self._store.versions(conn, action.id))

    async def list_actions(
        self, who: Principal, size: int, token: str
    ) -> tuple[list[ActionView], str]:
        limit = page_size(size)
        cursor = decode_token(token, ("after",))
        async with self._store.transaction() as conn:
            rows = await self._store.list_actions(
                conn, _org(who), cursor["after"] if cursor else None, limit + 1
            )
            views = [_view(r, await self._store.versions(conn, r.id)) for r in rows[:limit]]
        more = len(rows) > limit
        return views, encode_token({"after": rows[limit - 1].name}) if more else ""

    async def versions(
        self, who: Principal, ref: str, size: int, token: str
    ) -> tuple[list[VersionRow], str]:
        limit = page_size(size)
        cursor = decode_token(token, ("before",))
        async with self._store.transaction() as conn:
            action = await self._load(conn, who, ref)
            rows = await self._store.versions(
                conn, action.id, cursor["before"] if cursor else None, limit + 1
            )
        more = len(rows) > limit
        return rows[:limit], encode_token({"before": rows[limit - 1].version}) if more else ""

    async def version(
        self, who: Principal, ref: str, number: int
    ) -> tuple[ActionRow, VersionRow, list[ReviewRow]]:
        async with self._store.transaction() as conn:
            action = await self._load(conn, who, ref)
            version = await self._store.version(conn, action.id, number)
            if version is None:
                raise not_found("version", f"{ref}@{number}")
            return action, version, await self._store.reviews(conn, action.id, number)

    async def review(
        self, who: Principal, ref: str, number: int, decision: str, comment: str
    ) -> tuple[ActionRow, VersionRow, list[ReviewRow]]:
        decision, comment = validate_decision(decision, comment)
        async with self._store.transaction() as conn:
            action = await self._load(conn, who, ref, lock=True)
            version = await self._store.version(conn, action.id, number)
            if version is None:
                raise not_found("version", f"{ref}@{number}")
            if version.uploaded_by == who.key_id:
                raise errors.self_review()
            if version.review_status != decision or version.review_comment != comment:
                before = version.review_status
                version = await self._store.set_review(
                    conn, action.id, number, decision, comment, who.key_id
                )
                await self._store.record_review(
                    conn, action.id, number, before, decision, comment, who.key_id
                )
                action = await self._store.update(conn, action.id)
                await self._enqueue_state(conn, action, await self._store.versions(conn, action.id))
            reviews = await self._store.reviews(conn, action.id, number)
        self._on_commit()
        return action, version, reviews

    async def set_enabled(self, who: Principal, ref: str, enabled: bool) -> ActionView:
        async with self._store.transaction() as conn:
            action = await self._load(conn, who, ref, lock=True)
            versions = await self._store.versions(conn, action.id)
            if action.enabled != enabled:
                action = await self._store.update(conn, action.id, enabled=enabled)
                await self._enqueue_state(conn, action, versions)
        self._on_commit()
        return _view(action, versions)

    async def usages(self, who: Principal, ref: str) -> list[usages.UsageRow]:
        async with self._store.transaction() as conn:
            action = await self._load(conn, who, ref)
            return await usages.referencing(conn, action.organization_id, _refs(action))

    async def delete(self, who: Principal, ref: str) -> None:
        async with self._store.transaction() as conn:
            action = await self._load(conn, who, ref, lock=True)
            used = await usages.referencing(conn, action.organization_id, _refs(action))
            if used:
                raise errors.action_in_use([f"{u.workflow_name} ({u.workflow_id})" for u in used])
            await self._store.delete(conn, action.id)
            await enqueue(conn, SCHEMA, *tombstone(str(action.id)))
        self._on_commit()

    async def simulate(
        self, who: Principal, ref: str, number: int, payload_json: str, secrets: dict[str, str]
    ) -> tuple[int, executor_pb.RunResult]:
        _check_payload(payload_json)
        async with self._store.transaction() as conn:
            action = await self._load(conn, who, ref)
            versions = await self._store.versions(conn, action.id)
            if not versions:
                raise errors.no_version(ref)
            version = (
                versions[0]
                if number == 0
                else next((v for v in versions if v.version == number), None)
            )
            if version is None:
                raise not_found("version", f"{ref}@{number}")
            module = await self._store.module(conn, action.id, version.version)
        result = await self._sandbox.simulate(
            executor_pb.SimulateRequest(
                organization_id=action.organization_id,
                action_name=action.name,
                wasm=module,
                permissions=version.permissions,
                payload_json=payload_json,
                secrets=secrets,
            )
        )
        return version.version, result

    async def _load(self, conn: Conn, who: Principal, ref: str, *, lock: bool = False) -> ActionRow:
        if not ref:
            raise invalid_field("action", "is required (an action id or name)")
        action = await self._store.find(conn, _org(who), ref, lock=lock)
        if action is None:
            raise not_found("action", ref)
        return action

    async def _enqueue_state(
        self, conn: Conn, action: ActionRow, versions: list[VersionRow]
    ) -> None:
        await enqueue(conn, SCHEMA, *state_record(action, versions))


def _view(action: ActionRow, versions: list[VersionRow]) -> ActionView:
    approved = [v.version for v in versions if v.review_status == APPROVED]
    return ActionView(
        action,
        max((v.version for v in versions), default=0),
        max(approved, default=0),
    )


def _refs(action: ActionRow) -> list[str]:
    """Steps may name an action by its name or its id."""
    return [action.name, str(action.id)]


def _check_payload(payload_json: str) -> None:
    if len(payload_json.encode()) > MAX_PAYLOAD_BYTES:
        raise invalid_field("payload_json", "must be at most 1 MiB")
    try:
        payload = json.loads(payload_json or "{}")
    except json.JSONDecodeError as error:
        raise invalid_field("payload_json", f"is not valid JSON: {error.msg}") from None
    if not isinstance(payload, dict):
        raise invalid_field("payload_json", "must be a JSON object")


def _org(who: Principal) -> str:
    if who.organization_id is None:
        raise invalid_field("organization", "this call needs an organization's API key")
    return who.organization_id
