"""The authenticated caller and the role check servicer methods declare."""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from libs.errors import permission_denied, unauthenticated


class Role(enum.IntEnum):
    """Ordered: each role can do everything the roles below it can."""

    VIEWER = 1
    DEVELOPER = 2
    ADMIN = 3

    @classmethod
    def parse(cls, text: str) -> Role:
        return cls[text.upper()]

    @property
    def label(self) -> str:
        return self.name.lower()


ROLE_NAMES = tuple(r.label for r in Role)


@dataclass(frozen=True)
class Principal:
    """A caller. The operator (platform owner) has no organization."""

    key_id: str
    organization_id: str | None
    project_id: str | None
    role: Role
    is_operator: bool = False
    # Set when the caller is another eventflow service, proven by mutual TLS.
    service: str | None = None

    @classmethod
    def operator(cls) -> Principal:
        return cls("operator", None, None, Role.ADMIN, is_operator=True)

    @classmethod
    def of_service(cls, service: str) -> Principal:
        return cls(f"service:{service}", None, None, Role.VIEWER, service=service)


_current: ContextVar[Principal | None] = ContextVar("eventflow_principal", default=None)

F = TypeVar("F", bound=Callable[..., Any])


def requires(role: Role) -> Callable[[F], F]:
    """Decorate a servicer method: the caller needs at least ``role``.

    The operator passes every check; it can only reach data through the
    organization it names, which tenancy code handles explicitly.
    """

    def decorate(method: F) -> F:
        @functools.wraps(method)
        async def wrapper(self: object, request: object, context: object) -> object:
            authorize(role)
            return await method(self, request, context)

        return wrapper  # type: ignore[return-value]

    return decorate


def authorize(role: Role) -> Principal:
    """The caller, if it holds at least ``role``: what ``requires`` checks, as a call
    (streaming handlers are async generators, which the decorator cannot await)."""
    principal = _current.get()
    if principal is None:
        raise unauthenticated("MISSING_CREDENTIALS", "an API key is required")
    if principal.service is not None:
        raise permission_denied(
            "SERVICE_NOT_ALLOWED", "tenant methods take an API key, not a service identity"
        )
    if principal.role < role:
        raise permission_denied("ROLE_TOO_LOW", f"this call needs the {role.label} role")
    return principal


def requires_service(*services: str) -> Callable[[F], F]:
    """Decorate a servicer method that only the named services may call.

    Their identity comes from the verified client certificate on the internal
    listener; no API key, however privileged, passes.
    """

    def decorate(method: F) -> F:
        @functools.wraps(method)
        async def wrapper(self: object, request: object, context: object) -> object:
            principal = _current.get()
            if principal is None or principal.service not in services:
                raise permission_denied(
                    "SERVICE_ONLY", f"only the {' or '.join(services)} service may call this"
                )
            return await method(self, request, context)

        return wrapper  # type: ignore[return-value]

    return decorate
