"""Table views of events, their reactions, instances, instance logs and dead letters.

Step positions travel as 0-based indexes (an instance's ``current_step`` is
the index of the next step to run); they are shown 1-based, as the ``#``
column of ``eventflow workflows get`` numbers the same steps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from eventflow.orchestrator.v1 import event_pb2, instance_pb2

from cli.output import EMPTY, render_fields, render_table, timestamp

INSTANCE_HEADERS = ("ID", "WORKFLOW", "VERSION", "EVENT", "SUBJECT", "STATUS", "STEP", "UPDATED")
STEP_HEADERS = ("#", "NAME", "TYPE", "STATUS", "ATTEMPTS", "ERROR")
LOG_HEADERS = ("POS", "TIME", "KIND", "STEP", "ATTEMPT", "DETAIL")
DEAD_LETTER_HEADERS = ("ID", "WORKFLOW", "STEP", "ATTEMPTS", "REASON", "STATUS", "CREATED")
# Log details can hold whole step outputs; `--output json` has them whole.
DETAIL_WIDTH = 80
# Log kinds that concern one step; the others leave the STEP column empty.
_STEP_KINDS = ("step_", "wait_")


def step_number(index: int) -> int:
    return index + 1


def _count(number: int) -> str:
    return str(number) if number else EMPTY


def _workflow(workflow_id: str, version: int) -> str:
    return f"{workflow_id}@{version}" if version else workflow_id


def _status(status: str, is_test: bool) -> str:
    return f"{status} (test run)" if is_test else status


def _project(organization_id: str, project_id: str) -> str:
    return f"{organization_id}/{project_id}" if organization_id else project_id


def pretty_json(text: str) -> str:
    """Indented JSON; text that does not parse is shown as it came."""
    if not text:
        return EMPTY
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def compact_json(text: str) -> str:
    """JSON on one line without padding; text that does not parse is shown as it came."""
    if not text:
        return ""
    try:
        return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
    except ValueError:
        return text


# ------------------------------------------------------------------ events


def event_detail(e: event_pb2.Event) -> str:
    fields = [
        ("ID", e.id),
        ("Type", e.type),
        ("Source", e.source),
        ("Subject", e.subject),
        ("Project", _project(e.organization_id, e.project_id)),
        ("Environment", e.environment),
        ("Time", timestamp(e.time)),
        ("Received", timestamp(e.receive_time)),
        ("Correlation", e.correlation_id),
        ("Causation", e.causation_id),
        ("Depth", e.depth),
        ("Replay", "side effects skipped" if e.replay_skip_side_effects else EMPTY),
    ]
    return f"{render_fields(fields)}\n\nData:\n{pretty_json(e.data_json)}"


def _steps_table(steps: Sequence[event_pb2.StepOutcome]) -> str:
    rows = [
        (step_number(s.index), s.name, s.type, s.status, _count(s.attempts), s.error) for s in steps
    ]
    # Errors are never cut: executor messages name the bad field at their end.
    return render_table(STEP_HEADERS, rows)


def _reaction(r: event_pb2.Reaction) -> str:
    head = render_fields(
        [
            ("Workflow", _workflow(r.workflow_id, r.workflow_version)),
            ("Instance", r.instance_id),
            ("Status", _status(r.instance_status, r.is_test)),
        ]
    )
    steps = _steps_table(r.steps) if r.steps else "No steps ran."
    indented = "\n".join(f"  {line}" for line in steps.splitlines())
    return f"{head}\nSteps:\n{indented}"


def reactions(items: Sequence[event_pb2.Reaction]) -> str:
    if not items:
        return "No workflow reacted to this event."
    return "\n\n".join(_reaction(r) for r in items)


# --------------------------------------------------------------- instances


def _current_step(i: instance_pb2.Instance) -> str:
    # A completed instance points past its last step.
    return EMPTY if i.status == "completed" else str(step_number(i.current_step))


def instance_list(instances: Sequence[instance_pb2.Instance]) -> str:
    if not instances:
        return "No instances."
    rows = [
        (
            i.id,
            i.workflow_id,
            _count(i.workflow_version),
            i.event_id,
            i.subject,
            _status(i.status, i.is_test),
            _current_step(i),
            timestamp(i.update_time),
        )
        for i in instances
    ]
    return render_table(INSTANCE_HEADERS, rows)


def instance_detail(i: instance_pb2.Instance) -> str:
    return render_fields(
        [
            ("ID", i.id),
            ("Workflow", _workflow(i.workflow_id, i.workflow_version)),
            ("Project", _project(i.organization_id, i.project_id)),
            ("Environment", i.environment),
            ("Event", i.event_id),
            ("Subject", i.subject),
            ("Status", _status(i.status, i.is_test)),
            ("Step", _current_step(i)),
            ("Attempt", _count(i.attempt)),
            ("Created", timestamp(i.create_time)),
            ("Updated", timestamp(i.update_time)),
        ]
    )


def _log_step(entry: instance_pb2.InstanceLogEntry) -> str:
    return str(step_number(entry.step)) if entry.kind.startswith(_STEP_KINDS) else EMPTY


def log_is_cut(entries: Sequence[instance_pb2.InstanceLogEntry]) -> bool:
    """Whether ``log_table`` shortens some detail."""
    return any(len(compact_json(e.detail_json)) > DETAIL_WIDTH for e in entries)


def log_table(entries: Sequence[instance_pb2.InstanceLogEntry]) -> str:
    if not entries:
        return "No log entries."
    rows = [
        (
            e.position,
            timestamp(e.time),
            e.kind,
            _log_step(e),
            _count(e.attempt),
            compact_json(e.detail_json),
        )
        for e in entries
    ]
    return render_table(LOG_HEADERS, rows, max_width=DETAIL_WIDTH)


# ------------------------------------------------------------ dead letters


def _dead_step(d: instance_pb2.DeadLetter) -> str:
    number = f"#{step_number(d.step)}"
    return f"{number} {d.step_name}" if d.step_name else number


def dead_letter_list(items: Sequence[instance_pb2.DeadLetter]) -> str:
    if not items:
        return "No dead letters."
    rows = [
        (
            d.id,
            _workflow(d.workflow_id, d.workflow_version),
            _dead_step(d),
            _count(d.attempts),
            d.reason,
            d.status,
            timestamp(d.create_time),
        )
        for d in items
    ]
    return render_table(DEAD_LETTER_HEADERS, rows)


def dead_letter_detail(d: instance_pb2.DeadLetter) -> str:
    fields = [
        ("ID", d.id),
        ("Status", d.status),
        ("Reason", d.reason),
        ("Workflow", _workflow(d.workflow_id, d.workflow_version)),
        ("Step", _dead_step(d)),
        ("Attempts", _count(d.attempts)),
        ("Event", d.event_id),
        ("Instance", d.instance_id),
        ("Redriven as", d.redrive_instance_id),
        ("Project", _project(d.organization_id, d.project_id)),
        ("Environment", d.environment),
        ("Created", timestamp(d.create_time)),
    ]
    # On its own lines: a multi-line error (a trap's backtrace) keeps its shape.
    return f"{render_fields(fields)}\n\nError:\n{d.error or EMPTY}"
