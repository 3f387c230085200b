"""Governance's side of the compacted action state topic (format: action_state.proto)."""

from __future__ import annotations

from eventflow.governance.v1 import action_state_pb2

from libs.bus import topics as bus_topics
from libs.bus.base import Headers
from services.governance.domain.actions import APPROVED
from services.governance.storage.actions import ActionRow, VersionRow

CONTENT_HEADERS: Headers = (
    ("content-type", b"application/x-protobuf"),
    ("ce_type", b"eventflow.governance.v1.ActionState"),
)


def state_record(
    action: ActionRow, versions: list[VersionRow]
) -> tuple[str, bytes, bytes, Headers]:
    """(topic, key, value, headers) of the action's current runnable state."""
    state = action_state_pb2.ActionState(
        action_id=str(action.id),
        organization_id=action.organization_id,
        name=action.name,
        enabled=action.enabled,
        approved_versions=[
            action_state_pb2.RunnableVersion(
                version=v.version, sha256=v.sha256, permissions=v.permissions
            )
            for v in sorted(versions, key=lambda v: -v.version)
            if v.review_status == APPROVED
        ],
        revision=action.revision,
    )
    state.change_time.FromDatetime(action.update_time)
    return (
        bus_topics.GOVERNANCE_ACTIONS,
        str(action.id).encode(),
        state.SerializeToString(deterministic=True),
        CONTENT_HEADERS,
    )


def tombstone(action_id: str) -> tuple[str, bytes, None, Headers]:
    return (bus_topics.GOVERNANCE_ACTIONS, action_id.encode(), None, CONTENT_HEADERS)
