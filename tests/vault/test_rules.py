"""Validation and access rules of the vault, without a server."""

from __future__ import annotations

import grpc
import pytest

from libs.auth import Principal, Role
from libs.errors import EventflowError
from services.vault.domain import rules
from services.vault.domain.values import SecretValue

CANARY = "sk_live_CANARY_rules"


def violations(error: EventflowError) -> list[str]:
    return [v.field for v in error.violations]


@pytest.mark.parametrize("key", ["A", "RISK_THRESHOLD", "a1_B2", "_", "x" * 64])
def test_valid_keys(key: str) -> None:
    rules.validate_secret_name("score-order", key)


@pytest.mark.parametrize(
    "key",
    ["", "x" * 65, "RISK-THRESHOLD", "RISK THRESHOLD", "KEY\n", "KEY\r\n", "\nKEY", "ÄPFEL", "a.b"],
)
def test_invalid_keys_are_refused_naming_the_field(key: str) -> None:
    with pytest.raises(EventflowError) as caught:
        rules.validate_secret_name("score-order", key)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert violations(caught.value) == ["key"]


def test_a_trailing_newline_does_not_sneak_past_the_key_pattern() -> None:
    # `re.match(r"...$")` would accept this; fullmatch does not.
    with pytest.raises(EventflowError):
        rules.validate_secret_name("score-order", "RISK_THRESHOLD\n")


@pytest.mark.parametrize(
    "action", ["", " score", "score ", "sc\x00ore", "line\nbreak", "x" * 201, "tab\there"]
)
def test_invalid_action_names_are_refused(action: str) -> None:
    with pytest.raises(EventflowError) as caught:
        rules.validate_secret_name(action, "KEY")
    assert violations(caught.value) == ["action"]


@pytest.mark.parametrize("action", ["score-order", "Score Order v2", "x" * 200, "réseau"])
def test_valid_action_names(action: str) -> None:
    rules.validate_secret_name(action, "KEY")


def test_value_limits_are_in_utf8_bytes() -> None:
    rules.validate_new_secret("a", "K", SecretValue("x" * 65536))
    with pytest.raises(EventflowError) as caught:
        rules.validate_new_secret("a", "K", SecretValue("x" * 65537))
    assert violations(caught.value) == ["value"]
    with pytest.raises(EventflowError):
        rules.validate_new_secret("a", "K", SecretValue("é" * 32769))  # 65538 bytes


def test_an_empty_value_is_refused() -> None:
    with pytest.raises(EventflowError) as caught:
        rules.validate_new_secret("a", "K", SecretValue(""))
    assert violations(caught.value) == ["value"]


def test_every_bad_field_is_named_at_once() -> None:
    with pytest.raises(EventflowError) as caught:
        rules.validate_new_secret("", "bad key", SecretValue(""))
    assert violations(caught.value) == ["action", "key", "value"]


def test_validation_messages_never_repeat_the_input() -> None:
    big = SecretValue(CANARY * 5000)
    for call in (
        lambda: rules.validate_new_secret("a", CANARY + "!", SecretValue("v")),
        lambda: rules.validate_new_secret("a", "K", big),
        lambda: rules.validate_new_secret(CANARY + "\n", "K", SecretValue("v")),
        lambda: rules.resolve_keys("a", [CANARY + "-"], ""),
    ):
        with pytest.raises(EventflowError) as caught:
            call()
        error = caught.value
        assert CANARY not in error.message
        assert all(CANARY not in v.description for v in error.violations)


def test_resolve_keys_are_deduplicated_in_order() -> None:
    assert rules.resolve_keys("a", ["B", "A", "B"], "") == ["B", "A"]


def test_resolve_names_the_bad_key_by_index() -> None:
    with pytest.raises(EventflowError) as caught:
        rules.resolve_keys("a", ["GOOD", "bad-one"], "")
    assert violations(caught.value) == ["keys[1]"]


def test_resolve_takes_at_most_25_keys_and_a_short_purpose() -> None:
    rules.resolve_keys("a", [f"K{i}" for i in range(25)], "p" * 200)
    with pytest.raises(EventflowError) as caught:
        rules.resolve_keys("a", [f"K{i}" for i in range(26)], "p" * 201)
    assert violations(caught.value) == ["keys", "purpose"]


ADMIN = Principal("k1", "acme", None, Role.ADMIN)
PROJECT_DEV = Principal("k2", "acme", "web", Role.DEVELOPER)


def test_a_tenant_acts_on_its_own_organization() -> None:
    assert rules.organization_for(ADMIN, "") == "acme"
    assert rules.organization_for(ADMIN, "acme") == "acme"


def test_a_tenant_cannot_name_another_organization() -> None:
    with pytest.raises(EventflowError) as caught:
        rules.organization_for(ADMIN, "globex")
    assert (caught.value.code, caught.value.reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "ORGANIZATION_NOT_ALLOWED",
    )


def test_the_operator_must_name_the_organization() -> None:
    assert rules.organization_for(Principal.operator(), "globex") == "globex"
    with pytest.raises(EventflowError) as caught:
        rules.organization_for(Principal.operator(), "")
    assert violations(caught.value) == ["organization_id"]


def test_a_project_bound_key_reads_but_does_not_change_secrets() -> None:
    assert rules.organization_for(PROJECT_DEV, "") == "acme"
    with pytest.raises(EventflowError) as caught:
        rules.organization_to_change(PROJECT_DEV, "")
    assert caught.value.reason == "ORGANIZATION_KEY_REQUIRED"


def test_a_key_version_in_use_cannot_be_retired() -> None:
    with pytest.raises(EventflowError) as caught:
        rules.check_retirable(1, primary=2, usage=3)
    assert (caught.value.code, caught.value.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "KEY_VERSION_IN_USE",
    )


def test_the_primary_cannot_be_retired_even_unused() -> None:
    with pytest.raises(EventflowError) as caught:
        rules.check_retirable(2, primary=2, usage=0)
    assert caught.value.reason == "KEY_VERSION_PRIMARY"


def test_an_unused_older_version_can_be_retired() -> None:
    rules.check_retirable(1, primary=2, usage=0)
