"""SPEC §2: API keys are stored hashed and carry an organization, a project and a role."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import grpc
import pytest

from libs.auth import KeyRecord, Principal, Role, hash_secret, new_api_key, parse_api_key, requires
from libs.auth.keys import ApiKeySecret, verify
from libs.auth.principal import _current
from libs.errors import EventflowError

TOKEN_FORMAT = re.compile(r"^efk_[a-z0-9]{12}_[A-Za-z0-9_-]{43}$")


def record_for(key: ApiKeySecret, **fields: object) -> KeyRecord:
    record = KeyRecord(
        key_id=key.key_id,
        organization_id="acme",
        project_id="checkout",
        role=Role.DEVELOPER,
        secret_hash=hash_secret(key.secret),
        revoked=False,
    )
    return replace(record, **fields)  # type: ignore[arg-type]


@contextmanager
def calling_as(principal: Principal | None) -> Iterator[None]:
    token = _current.set(principal)
    try:
        yield
    finally:
        _current.reset(token)


class Servicer:
    @requires(Role.VIEWER)
    async def GetWorkflow(self, request: object, context: object) -> str:
        return f"read {request}"

    @requires(Role.DEVELOPER)
    async def PublishWorkflow(self, request: object, context: object) -> str:
        return f"published {request}"

    @requires(Role.ADMIN)
    async def EmergencyStop(self, request: object, context: object) -> str:
        return f"stopped {request}"


def key_of(role: Role) -> Principal:
    return Principal("key000000001", "acme", None, role)


# --- key format ---------------------------------------------------------------


def test_a_new_key_has_the_documented_format() -> None:
    key = new_api_key()
    assert TOKEN_FORMAT.match(key.token)
    assert key.token == f"efk_{key.key_id}_{key.secret}"


def test_a_key_round_trips_through_parse() -> None:
    key = new_api_key()
    assert parse_api_key(key.token) == key


def test_every_new_key_is_different() -> None:
    keys = [new_api_key() for _ in range(50)]
    assert len({k.key_id for k in keys}) == 50
    assert len({k.secret for k in keys}) == 50


@pytest.mark.parametrize(
    "token",
    [
        "",
        "efk_",
        "efk_abc_def",
        "Bearer efk_abcdefghijkl_" + "A" * 43,
        "efk_ABCDEFGHIJKL_" + "A" * 43,
        "efk_abcdefghijkl_" + "A" * 42,
        "efk_abcdefghijkl_" + "A" * 44,
        "efx_abcdefghijkl_" + "A" * 43,
        "efk_abcdefghijkl_" + "A" * 42 + "=",
        "efk-abcdefghijkl-" + "A" * 43,
    ],
)
def test_malformed_tokens_do_not_parse(token: str) -> None:
    assert parse_api_key(token) is None


# --- hashing and verification -------------------------------------------------


def test_the_stored_hash_is_not_the_secret() -> None:
    key = new_api_key()
    digest = hash_secret(key.secret)
    assert len(digest) == 32
    assert digest != key.secret.encode()
    assert key.secret.encode() not in digest
    assert key.secret not in digest.hex()


def test_hashing_is_deterministic_and_distinguishes_secrets() -> None:
    a, b = new_api_key(), new_api_key()
    assert hash_secret(a.secret) == hash_secret(a.secret)
    assert hash_secret(a.secret) != hash_secret(b.secret)


def test_the_right_secret_verifies_to_the_keys_principal() -> None:
    key = new_api_key()
    principal = verify(record_for(key), parse_api_key(key.token) or key)
    assert principal == Principal(key.key_id, "acme", "checkout", Role.DEVELOPER)
    assert principal is not None and not principal.is_operator


def test_an_org_wide_key_verifies_without_a_project() -> None:
    key = new_api_key()
    principal = verify(record_for(key, project_id=None, role=Role.ADMIN), key)
    assert principal == Principal(key.key_id, "acme", None, Role.ADMIN)


def test_a_wrong_secret_does_not_verify() -> None:
    key = new_api_key()
    impostor = ApiKeySecret(key.key_id, new_api_key().secret)
    assert verify(record_for(key), impostor) is None


def test_a_revoked_key_does_not_verify() -> None:
    key = new_api_key()
    assert verify(record_for(key, revoked=True), key) is None


# --- roles --------------------------------------------------------------------


def test_roles_are_ordered_viewer_developer_admin() -> None:
    assert Role.VIEWER < Role.DEVELOPER < Role.ADMIN
    assert sorted([Role.ADMIN, Role.VIEWER, Role.DEVELOPER]) == [
        Role.VIEWER,
        Role.DEVELOPER,
        Role.ADMIN,
    ]


@pytest.mark.parametrize(
    ("text", "role"),
    [("viewer", Role.VIEWER), ("developer", Role.DEVELOPER), ("ADMIN", Role.ADMIN)],
)
def test_roles_parse_from_their_names(text: str, role: Role) -> None:
    assert Role.parse(text) is role
    assert role.label == text.lower()


def test_the_operator_is_an_admin_outside_any_organization() -> None:
    operator = Principal.operator()
    assert operator.is_operator
    assert operator.role is Role.ADMIN
    assert operator.organization_id is None
    assert operator.project_id is None


# --- requires -----------------------------------------------------------------


@pytest.mark.parametrize("role", [Role.DEVELOPER, Role.ADMIN])
async def test_a_high_enough_role_runs_the_method(role: Role) -> None:
    with calling_as(key_of(role)):
        assert await Servicer().PublishWorkflow("w1", None) == "published w1"


async def test_every_role_can_read() -> None:
    for role in Role:
        with calling_as(key_of(role)):
            assert await Servicer().GetWorkflow("w1", None) == "read w1"


@pytest.mark.parametrize(
    ("role", "method"),
    [
        (Role.VIEWER, "PublishWorkflow"),
        (Role.VIEWER, "EmergencyStop"),
        (Role.DEVELOPER, "EmergencyStop"),
    ],
)
async def test_a_lower_role_is_denied(role: Role, method: str) -> None:
    with calling_as(key_of(role)), pytest.raises(EventflowError) as caught:
        await getattr(Servicer(), method)("w1", None)
    assert caught.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert caught.value.reason == "ROLE_TOO_LOW"


async def test_the_denial_names_the_role_needed() -> None:
    with calling_as(key_of(Role.VIEWER)), pytest.raises(EventflowError) as caught:
        await Servicer().EmergencyStop("all", None)
    assert "admin" in caught.value.message


async def test_the_operator_passes_every_role_check() -> None:
    with calling_as(Principal.operator()):
        assert await Servicer().EmergencyStop("all", None) == "stopped all"


async def test_no_principal_is_unauthenticated() -> None:
    with calling_as(None), pytest.raises(EventflowError) as caught:
        await Servicer().GetWorkflow("w1", None)
    assert caught.value.code == grpc.StatusCode.UNAUTHENTICATED
    assert caught.value.reason == "MISSING_CREDENTIALS"


def test_requires_keeps_the_method_name() -> None:
    assert Servicer.PublishWorkflow.__name__ == "PublishWorkflow"
