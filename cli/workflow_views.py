"""Table views of workflows, their steps, versions and publish previews."""

from __future__ import annotations

from collections.abc import Sequence

from eventflow.registry.v1 import workflow_pb2, workflow_service_pb2

from cli.output import EMPTY, duration, render_fields, render_table, timestamp

LIST_HEADERS = ("ID", "NAME", "TRIGGER", "ENV", "STATUS", "VERSION", "DRAFT")
STEP_HEADERS = ("#", "NAME", "TYPE", "TARGET", "ATTEMPTS", "BACKOFF")
VERSION_HEADERS = ("VERSION", "PUBLISHED", "BY", "HASH", "MESSAGE")
CHANGE_HEADERS = ("PATH", "KIND", "BEFORE", "AFTER")
# Preview values are JSON text of whole steps; keep the table readable and
# leave the full values to `--output json`.
CHANGE_CELL_WIDTH = 60


def _version(number: int) -> str:
    return str(number) if number else EMPTY


def _draft(workflow: workflow_pb2.Workflow) -> str:
    return "modified" if workflow.has_unpublished_changes else EMPTY


def workflow_list(workflows: Sequence[workflow_pb2.Workflow]) -> str:
    if not workflows:
        return "No workflows."
    rows = [
        (
            w.id,
            w.name,
            w.trigger_event,
            w.environment,
            w.status,
            _version(w.published_version),
            _draft(w),
        )
        for w in workflows
    ]
    return render_table(LIST_HEADERS, rows)


def _reentry(reentry: workflow_pb2.Reentry) -> str:
    mode = reentry.mode or "always"
    if mode == "cooldown":
        minutes = reentry.cooldown_minutes if reentry.HasField("cooldown_minutes") else 60
        return f"cooldown ({minutes} min)"
    return mode


def step_target(step: workflow_pb2.Step) -> str:
    if step.type == "webhook":
        return step.url
    if step.type == "custom_action":
        return f"{step.action}@{step.version}" if step.HasField("version") else step.action
    if step.type == "delay" and step.HasField("duration_ms"):
        return duration(step.duration_ms)
    return EMPTY


def _backoff(retry: workflow_pb2.RetryPolicy) -> str:
    parts = []
    if retry.HasField("backoff"):
        parts.append(retry.backoff)
    if retry.HasField("backoff_delay_ms"):
        parts.append(duration(retry.backoff_delay_ms))
    return " ".join(parts) or EMPTY


def steps_table(steps: Sequence[workflow_pb2.Step]) -> str:
    rows = [
        (
            i + 1,
            s.name,
            s.type,
            step_target(s),
            s.retry.max_attempts if s.retry.HasField("max_attempts") else EMPTY,
            _backoff(s.retry),
        )
        for i, s in enumerate(steps)
    ]
    return render_table(STEP_HEADERS, rows)


def workflow_detail(w: workflow_pb2.Workflow) -> str:
    fields = [
        ("ID", w.id),
        ("Name", w.name),
        ("Project", f"{w.organization_id}/{w.project_id}"),
        ("Trigger", w.trigger_event),
        ("Environment", w.environment),
        ("Status", w.status),
        ("Version", _version(w.published_version)),
        ("Draft", "modified since last publish" if w.has_unpublished_changes else EMPTY),
        ("Re-entry", _reentry(w.reentry)),
        ("Created", timestamp(w.create_time)),
        ("Updated", timestamp(w.update_time)),
    ]
    steps = steps_table(w.steps) if w.steps else "No steps."
    return f"{render_fields(fields)}\n\nSteps:\n{steps}"


def versions_table(versions: Sequence[workflow_pb2.WorkflowVersion]) -> str:
    if not versions:
        return "No published versions."
    rows = [
        (v.version, timestamp(v.create_time), v.created_by, v.definition_hash[:12], v.message)
        for v in versions
    ]
    return render_table(VERSION_HEADERS, rows, max_width=80)


def publish_outcome(response: workflow_service_pb2.PublishWorkflowResponse) -> str:
    number = response.version.version
    if response.outcome == workflow_service_pb2.PUBLISH_OUTCOME_UNCHANGED:
        return f"UNCHANGED: draft equals version {number}"
    return f"published version {number}"


def preview(response: workflow_service_pb2.PreviewPublishResponse) -> str:
    if response.unchanged:
        return f"no changes since version {response.base_version}"
    if response.base_version:
        head = f"changes since version {response.base_version}:"
    else:
        head = "never published; publishing would create version 1 with:"
    rows = [(c.path, c.kind, c.before, c.after) for c in response.changes]
    return f"{head}\n{render_table(CHANGE_HEADERS, rows, max_width=CHANGE_CELL_WIDTH)}"
