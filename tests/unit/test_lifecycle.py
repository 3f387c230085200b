"""SPEC §4 lifecycle: draft → active ⇄ paused → archived."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest

from libs.errors import EventflowError
from services.registry.domain import lifecycle
from services.registry.domain.lifecycle import ACTIVE, ARCHIVED, DRAFT, PAUSED

WORKFLOW_ID = "3f1c2b8e-0000-4000-8000-000000000001"


def refused(action: Callable[[str, str], object], status: str) -> EventflowError:
    with pytest.raises(EventflowError) as caught:
        action(status, WORKFLOW_ID)
    assert caught.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert WORKFLOW_ID in caught.value.message
    return caught.value


def test_publishing_a_draft_makes_it_active() -> None:
    assert lifecycle.after_publish(DRAFT, WORKFLOW_ID) == ACTIVE


def test_republishing_an_active_workflow_keeps_it_active() -> None:
    assert lifecycle.after_publish(ACTIVE, WORKFLOW_ID) == ACTIVE


def test_publishing_a_paused_workflow_does_not_resume_it() -> None:
    assert lifecycle.after_publish(PAUSED, WORKFLOW_ID) == PAUSED


def test_an_archived_workflow_cannot_be_published() -> None:
    assert refused(lifecycle.after_publish, ARCHIVED).reason == "WORKFLOW_ARCHIVED"


def test_disable_pauses_an_active_workflow() -> None:
    assert lifecycle.after_disable(ACTIVE, WORKFLOW_ID) == PAUSED


def test_enable_resumes_a_paused_workflow() -> None:
    assert lifecycle.after_enable(PAUSED, WORKFLOW_ID) == ACTIVE


def test_enable_and_disable_are_idempotent() -> None:
    assert lifecycle.after_enable(ACTIVE, WORKFLOW_ID) == ACTIVE
    assert lifecycle.after_disable(PAUSED, WORKFLOW_ID) == PAUSED


@pytest.mark.parametrize("toggle", [lifecycle.after_enable, lifecycle.after_disable])
def test_enable_and_disable_need_a_published_workflow(toggle: Callable[[str, str], str]) -> None:
    assert refused(toggle, DRAFT).reason == "WORKFLOW_NOT_PUBLISHED"


@pytest.mark.parametrize("toggle", [lifecycle.after_enable, lifecycle.after_disable])
def test_an_archived_workflow_cannot_be_enabled_or_disabled(
    toggle: Callable[[str, str], str],
) -> None:
    assert refused(toggle, ARCHIVED).reason == "WORKFLOW_ARCHIVED"


@pytest.mark.parametrize("status", [DRAFT, ACTIVE, PAUSED])
def test_any_live_workflow_can_be_archived(status: str) -> None:
    assert lifecycle.after_archive(status, WORKFLOW_ID) == ARCHIVED


def test_archived_is_terminal() -> None:
    assert refused(lifecycle.after_archive, ARCHIVED).reason == "WORKFLOW_ARCHIVED"


@pytest.mark.parametrize("status", [DRAFT, ACTIVE, PAUSED])
def test_live_workflows_are_editable(status: str) -> None:
    lifecycle.check_editable(status, WORKFLOW_ID)


def test_an_archived_workflow_is_not_editable() -> None:
    assert refused(lifecycle.check_editable, ARCHIVED).reason == "WORKFLOW_ARCHIVED"


def test_a_draft_can_be_deleted() -> None:
    lifecycle.check_deletable(DRAFT, WORKFLOW_ID)


@pytest.mark.parametrize("status", [ACTIVE, PAUSED])
def test_a_published_workflow_cannot_be_deleted(status: str) -> None:
    assert refused(lifecycle.check_deletable, status).reason == "WORKFLOW_PUBLISHED"


def test_an_archived_workflow_cannot_be_deleted() -> None:
    refused(lifecycle.check_deletable, ARCHIVED)


def test_the_four_statuses() -> None:
    assert lifecycle.STATUSES == ("draft", "active", "paused", "archived")
