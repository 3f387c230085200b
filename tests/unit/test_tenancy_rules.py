"""SPEC §2: organizations, projects, plans, and which tenant a call acts on."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest

from libs.auth import Principal, Role
from libs.errors import EventflowError
from services.registry.domain.tenancy import (
    check_environment_allowed,
    organization_for,
    project_for,
    validate_plan,
    validate_slug,
)

ORG_WIDE_KEY = Principal("key000000001", "acme", None, Role.DEVELOPER)
PROJECT_KEY = Principal("key000000002", "acme", "checkout", Role.DEVELOPER)
OPERATOR = Principal.operator()


def raised(call: Callable[[], object]) -> EventflowError:
    with pytest.raises(EventflowError) as caught:
        call()
    return caught.value


def assert_invalid_field(error: EventflowError, field: str) -> None:
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in error.violations] == [field]


# --- slugs ------------------------------------------------------------------


@pytest.mark.parametrize("slug", ["acme", "a", "acme-eu-2", "a" + "b" * 62, "x--y"])
def test_slugs_start_with_a_letter_then_lowercase_letters_digits_and_dashes(slug: str) -> None:
    assert validate_slug(slug, "organization.id") == slug


@pytest.mark.parametrize(
    "slug", ["", "Acme", "1acme", "-acme", "acme_eu", "acme.eu", "acme eu", "a" * 64, "ácme"]
)
def test_bad_slugs_are_rejected_naming_the_field(slug: str) -> None:
    assert_invalid_field(raised(lambda: validate_slug(slug, "project.id")), "project.id")


def test_slug_with_a_trailing_newline_is_rejected() -> None:
    error = raised(lambda: validate_slug("acme\n", "organization.id"))
    assert_invalid_field(error, "organization.id")


# --- plans ------------------------------------------------------------------


@pytest.mark.parametrize("plan", ["starter", "team", "enterprise"])
def test_the_three_plans(plan: str) -> None:
    assert validate_plan(plan) == plan


@pytest.mark.parametrize("plan", ["free", "Team", "", "pro"])
def test_unknown_plans_are_rejected(plan: str) -> None:
    assert_invalid_field(raised(lambda: validate_plan(plan)), "plan")
    assert_invalid_field(
        raised(lambda: validate_plan(plan, "organization.plan")), "organization.plan"
    )


def test_sandbox_is_disabled_on_the_starter_plan() -> None:
    error = raised(lambda: check_environment_allowed("starter", "sandbox"))
    assert error.code == grpc.StatusCode.FAILED_PRECONDITION
    assert error.reason == "SANDBOX_DISABLED"


def test_production_is_available_on_every_plan() -> None:
    for plan in ("starter", "team", "enterprise"):
        check_environment_allowed(plan, "production")


@pytest.mark.parametrize("plan", ["team", "enterprise"])
def test_sandbox_is_available_on_team_and_enterprise(plan: str) -> None:
    check_environment_allowed(plan, "sandbox")


# --- organization_for -------------------------------------------------------


def test_a_tenant_key_acts_on_its_own_organization() -> None:
    assert organization_for(ORG_WIDE_KEY, "") == "acme"
    assert organization_for(ORG_WIDE_KEY, "acme") == "acme"
    assert organization_for(PROJECT_KEY, "acme") == "acme"


def test_a_tenant_key_cannot_name_another_organization() -> None:
    error = raised(lambda: organization_for(ORG_WIDE_KEY, "globex"))
    assert error.code == grpc.StatusCode.PERMISSION_DENIED
    assert error.reason


def test_naming_another_organization_is_denied_with_an_organization_reason() -> None:
    # registry/errors.py defines ORGANIZATION_NOT_ALLOWED for exactly this case; the
    # answer must not talk about a *project* called 'globex'.
    error = raised(lambda: organization_for(ORG_WIDE_KEY, "globex"))
    assert error.reason == "ORGANIZATION_NOT_ALLOWED"
    assert "project" not in error.message


def test_the_answer_for_another_organization_does_not_depend_on_whether_it_exists() -> None:
    first = raised(lambda: organization_for(ORG_WIDE_KEY, "globex"))
    second = raised(lambda: organization_for(ORG_WIDE_KEY, "no-such-org-anywhere"))
    assert (first.code, first.reason) == (second.code, second.reason)


def test_the_operator_acts_on_the_organization_it_names() -> None:
    assert organization_for(OPERATOR, "globex") == "globex"


def test_the_operator_must_name_an_organization() -> None:
    assert_invalid_field(raised(lambda: organization_for(OPERATOR, "")), "organization_id")
    assert_invalid_field(raised(lambda: organization_for(OPERATOR, "", "id")), "id")


# --- project_for ------------------------------------------------------------


def test_a_project_key_acts_on_its_own_project() -> None:
    assert project_for(PROJECT_KEY, "") == "checkout"
    assert project_for(PROJECT_KEY, "checkout") == "checkout"
    assert project_for(PROJECT_KEY, "", required=False) == "checkout"


def test_a_project_key_cannot_name_another_project() -> None:
    error = raised(lambda: project_for(PROJECT_KEY, "billing"))
    assert error.code == grpc.StatusCode.PERMISSION_DENIED
    assert error.reason == "PROJECT_NOT_ALLOWED"


@pytest.mark.parametrize("principal", [ORG_WIDE_KEY, OPERATOR], ids=["org-wide", "operator"])
def test_an_org_wide_caller_acts_on_the_project_it_names(principal: Principal) -> None:
    assert project_for(principal, "billing") == "billing"
    assert project_for(principal, "billing", required=False) == "billing"


@pytest.mark.parametrize("principal", [ORG_WIDE_KEY, OPERATOR], ids=["org-wide", "operator"])
def test_an_org_wide_caller_must_name_a_project_when_one_is_required(
    principal: Principal,
) -> None:
    assert_invalid_field(raised(lambda: project_for(principal, "")), "project_id")


def test_an_org_wide_key_may_leave_an_optional_project_unset() -> None:
    assert project_for(ORG_WIDE_KEY, "", required=False) is None
