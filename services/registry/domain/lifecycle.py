"""Workflow statuses and the transitions between them.

    draft --publish--> active <--enable/disable--> paused
      |                   \\                          /
      +--delete            +------> archived <-------+

A draft never runs. Archived is terminal.
"""

from __future__ import annotations

from services.registry import errors

DRAFT, ACTIVE, PAUSED, ARCHIVED = "draft", "active", "paused", "archived"
STATUSES = (DRAFT, ACTIVE, PAUSED, ARCHIVED)


def after_publish(status: str, workflow_id: str) -> str:
    if status == ARCHIVED:
        raise errors.archived(workflow_id)
    return ACTIVE if status == DRAFT else status


def after_enable(status: str, workflow_id: str) -> str:
    _require_published(status, workflow_id)
    return ACTIVE


def after_disable(status: str, workflow_id: str) -> str:
    _require_published(status, workflow_id)
    return PAUSED


def after_archive(status: str, workflow_id: str) -> str:
    if status == ARCHIVED:
        raise errors.archived(workflow_id)
    return ARCHIVED


def check_editable(status: str, workflow_id: str) -> None:
    if status == ARCHIVED:
        raise errors.archived(workflow_id)


def check_deletable(status: str, workflow_id: str) -> None:
    if status == ARCHIVED:
        raise errors.archived(workflow_id)
    if status != DRAFT:
        raise errors.already_published(workflow_id)


def _require_published(status: str, workflow_id: str) -> None:
    if status == ARCHIVED:
        raise errors.archived(workflow_id)
    if status == DRAFT:
        raise errors.not_published(workflow_id)
