"""Reading projections and their write history, tenant-scoped (SPEC §7).

A call acts on one (organization, project, environment): the organization
comes from the key, the project from the request or the key, the
environment defaults to production and a sandbox read needs a plan with one.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from psycopg_pool import AsyncConnectionPool

from libs.auth import Principal
from libs.auth.scope import organization_of, project_scope
from libs.db import transaction
from libs.errors import FieldViolation, invalid_argument, invalid_field, not_found
from libs.pagination import decode_token, encode_token, page_size
from services.orchestrator.environments import environment_of, require_environment
from services.orchestrator.storage import projections as store
from services.orchestrator.storage.events import Conn
from services.orchestrator.storage.projections import ProjectionRow, ProjectionWriteRow

# The names an action may write (SPEC §6); anything else can never match.
_NAME = re.compile(r"[a-z0-9_.-]{1,120}")
_ENTITY_TYPE = re.compile(r"[a-z0-9_.-]{1,64}")
_CHARSET = "a-z 0-9 _ . -"
MAX_ENTITY_ID = 200

T = TypeVar("T")


@dataclass(frozen=True)
class Key:
    """One keyed projection, as a request names it."""

    name: str
    entity_type: str
    entity_id: str


@dataclass(frozen=True)
class _Scope:
    organization_id: str
    project_id: str
    environment: str


class Projections:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool

    async def get(self, who: Principal, project: str, env: str, key: Key) -> ProjectionRow:
        environment = environment_of(env)
        _check_key(key)
        async with transaction(self._pool) as conn:
            scope = await _scope(conn, who, project, environment)
            return await _find(conn, scope, key)

    async def list_page(
        self,
        who: Principal,
        project: str,
        env: str,
        name: str,
        entity_type: str,
        status: str,
        size: int,
        token: str,
    ) -> tuple[list[ProjectionRow], str]:
        """One name's projections, newest update first."""
        environment = environment_of(env)
        _check(
            _name_violations(name)
            + _type_violations(entity_type, required=False)
            + _nul_violations("status", status)
        )
        limit = page_size(size)
        before = _cursor(token, uuid.UUID)
        async with transaction(self._pool) as conn:
            scope = await _scope(conn, who, project, environment)
            rows = await store.list_page(
                conn,
                scope.organization_id,
                scope.project_id,
                scope.environment,
                name,
                entity_type,
                status,
                before,
                limit + 1,
            )
        if len(rows) <= limit:
            return rows, ""
        last = rows[limit - 1]
        return rows[:limit], encode_token({"t": last.update_time.isoformat(), "id": str(last.id)})

    async def history(
        self, who: Principal, project: str, env: str, key: Key, size: int, token: str
    ) -> tuple[list[ProjectionWriteRow], str]:
        """Every write to one keyed projection, newest first."""
        environment = environment_of(env)
        _check_key(key)
        limit = page_size(size)
        before = _cursor(token, int)
        async with transaction(self._pool) as conn:
            scope = await _scope(conn, who, project, environment)
            projection = await _find(conn, scope, key)
            writes = await store.history_page(conn, projection.id, before, limit + 1)
        if len(writes) <= limit:
            return writes, ""
        last = writes[limit - 1]
        return writes[:limit], encode_token({"t": last.write_time.isoformat(), "id": last.id})


async def _scope(conn: Conn, who: Principal, project: str, environment: str) -> _Scope:
    organization_id = organization_of(who)
    project_id = project_scope(who, project)
    assert project_id is not None
    await require_environment(conn, organization_id, project_id, environment)
    return _Scope(organization_id, project_id, environment)


async def _find(conn: Conn, scope: _Scope, key: Key) -> ProjectionRow:
    found = await store.get(
        conn,
        scope.organization_id,
        scope.project_id,
        scope.environment,
        key.name,
        key.entity_type,
        key.entity_id,
    )
    if found is None:
        raise not_found("projection", f"{key.name}/{key.entity_type}/{key.entity_id}")
    return found


def _check_key(key: Key) -> None:
    violations = _name_violations(key.name) + _type_violations(key.entity_type, required=True)
    if not key.entity_id:
        violations.append(FieldViolation("entity_id", "is required"))
    elif len(key.entity_id) > MAX_ENTITY_ID:
        violations.append(
            FieldViolation("entity_id", f"must be at most {MAX_ENTITY_ID} characters")
        )
    _check(violations + _nul_violations("entity_id", key.entity_id))


def _name_violations(name: str) -> list[FieldViolation]:
    if not name:
        return [FieldViolation("name", "is required")]
    if not _NAME.fullmatch(name):
        return [FieldViolation("name", f"must be 1-120 characters of {_CHARSET}")]
    return []


def _type_violations(entity_type: str, *, required: bool) -> list[FieldViolation]:
    if not entity_type:
        return [FieldViolation("entity_type", "is required")] if required else []
    if not _ENTITY_TYPE.fullmatch(entity_type):
        return [FieldViolation("entity_type", f"must be 1-64 characters of {_CHARSET}")]
    return []


def _nul_violations(field: str, value: str) -> list[FieldViolation]:
    # PostgreSQL text cannot hold NUL, so no stored value has one.
    return [FieldViolation(field, "must not contain NUL characters")] if "\0" in value else []


def _check(violations: list[FieldViolation]) -> None:
    if violations:
        raise invalid_argument(violations)


def _cursor(token: str, id_type: Callable[[str], T]) -> tuple[datetime, T] | None:
    """The (time, id) a page ended on; a forged token is refused, not sent to SQL."""
    cursor = decode_token(token, ("t", "id"))
    if cursor is None:
        return None
    try:
        return datetime.fromisoformat(str(cursor["t"])), id_type(str(cursor["id"]))
    except ValueError:
        raise invalid_field("page_token", "is not a token this list returned") from None
