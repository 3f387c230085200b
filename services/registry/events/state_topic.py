"""The registry's side of the compacted workflow state topic (format: workflow_state.proto)."""

from __future__ import annotations

from eventflow.registry.v1 import workflow_state_pb2

from libs.bus import topics as bus_topics
from libs.bus.base import Headers

CONTENT_HEADERS: Headers = (
    ("content-type", b"application/x-protobuf"),
    ("ce_type", b"eventflow.registry.v1.WorkflowState"),
)


def state_record(
    state: workflow_state_pb2.WorkflowState,
) -> tuple[str, bytes, bytes, Headers]:
    """(topic, key, value, headers) of one state change."""
    return (
        bus_topics.REGISTRY_WORKFLOWS,
        state.workflow_id.encode(),
        state.SerializeToString(deterministic=True),
        CONTENT_HEADERS,
    )


def tombstone(workflow_id: str) -> tuple[str, bytes, None, Headers]:
    """The record that removes a deleted workflow from the compacted topic."""
    return (bus_topics.REGISTRY_WORKFLOWS, workflow_id.encode(), None, CONTENT_HEADERS)
