"""Table views of projections and their write history.

An appended (unkeyed) projection has no entity; its row shows ``-`` there.
Data can be whole documents, so tables show it on one line, cut short;
``get`` and ``--output json`` show it whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from eventflow.orchestrator.v1 import projection_pb2

from cli.orchestrator_views import compact_json, pretty_json, step_number
from cli.output import EMPTY, render_fields, render_table, timestamp

PROJECTION_HEADERS = ("ENTITY", "TITLE", "STATUS", "LAST EVENT", "UPDATED", "DATA")
WRITE_HEADERS = ("WRITTEN", "EVENT", "INSTANCE", "WORKFLOW", "STEP", "STATUS", "REPLAY", "DATA")
# Wide enough for ids; a longer data cell is cut (the JSON output has it whole).
CELL_WIDTH = 60


def entity(p: projection_pb2.Projection) -> str:
    return f"{p.entity_type}/{p.entity_id}" if p.entity_type else EMPTY


def data_is_cut(texts: Sequence[str]) -> bool:
    """Whether a table shortens some data cell."""
    return any(len(compact_json(t)) > CELL_WIDTH for t in texts)


def projection_list(items: Sequence[projection_pb2.Projection]) -> str:
    if not items:
        return "No projections."
    rows = [
        (
            entity(p),
            p.title,
            p.status,
            p.last_event_id,
            timestamp(p.update_time),
            compact_json(p.data_json),
        )
        for p in items
    ]
    return render_table(PROJECTION_HEADERS, rows, max_width=CELL_WIDTH)


def projection_detail(p: projection_pb2.Projection) -> str:
    fields = [
        ("Name", p.name),
        ("Entity", entity(p)),
        ("Title", p.title),
        ("Status", p.status),
        ("Project", f"{p.organization_id}/{p.project_id}" if p.organization_id else p.project_id),
        ("Environment", p.environment),
        ("Last event", p.last_event_id),
        ("Last instance", p.last_instance_id),
        ("Created", timestamp(p.create_time)),
        ("Updated", timestamp(p.update_time)),
        ("ID", p.id),
    ]
    return f"{render_fields(fields)}\n\nData:\n{pretty_json(p.data_json)}"


def write_list(items: Sequence[projection_pb2.ProjectionWrite]) -> str:
    if not items:
        return "No writes."
    rows = [
        (
            timestamp(w.write_time),
            w.event_id,
            w.instance_id,
            f"{w.workflow_id}@{w.workflow_version}",
            step_number(w.step),
            w.status,
            "replay" if w.replay else EMPTY,
            compact_json(w.data_json),
        )
        for w in items
    ]
    return render_table(WRITE_HEADERS, rows, max_width=CELL_WIDTH)
