"""Table views of custom actions, their versions, usages and simulation runs."""

from __future__ import annotations

from collections.abc import Sequence

from eventflow.governance.v1 import action_pb2, action_service_pb2

from cli.output import EMPTY, render_fields, render_table, timestamp

LIST_HEADERS = ("NAME", "ID", "ENABLED", "CURRENT", "LATEST", "UPDATED")
VERSION_HEADERS = (
    "VERSION",
    "SHA256",
    "SIZE",
    "REVIEW",
    "SIGNATURE",
    "PERMISSIONS",
    "UPLOADED BY",
    "CREATED",
)
REVIEW_HEADERS = ("TIME", "FROM", "TO", "BY", "COMMENT")
USAGE_HEADERS = ("WORKFLOW", "PROJECT", "NAME", "STATUS", "IN DRAFT", "IN PUBLISHED")
SHORT_HASH = 12
# Permission lists and review comments can be long; `--output json` has them whole.
CELL_WIDTH = 60


def _version(number: int) -> str:
    return str(number) if number else EMPTY


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def _status(text: str) -> str:
    """``pending_review`` -> ``pending review``."""
    return text.replace("_", " ")


def size(count: int) -> str:
    """Bytes in binary units: ``512 B``, ``1.5 KiB``, ``3.2 MiB``."""
    if count < 1024:
        return f"{count} B"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KiB"
    return f"{count / (1024 * 1024):.1f} MiB"


def micros(us: int) -> str:
    """A run's duration: ``850 µs``, ``12.3 ms``, ``1.50 s``."""
    if us < 1000:
        return f"{us} µs"
    if us < 1_000_000:
        return f"{us / 1000:.1f} ms"
    return f"{us / 1_000_000:.2f} s"


def action_list(actions: Sequence[action_pb2.Action]) -> str:
    if not actions:
        return "No actions."
    rows = [
        (
            a.name,
            a.id,
            _yes_no(a.enabled),
            _version(a.current_version),
            _version(a.latest_version),
            timestamp(a.update_time),
        )
        for a in actions
    ]
    return render_table(LIST_HEADERS, rows)


def action_detail(a: action_pb2.Action) -> str:
    return render_fields(
        [
            ("ID", a.id),
            ("Name", a.name),
            ("Organization", a.organization_id),
            ("Description", a.description),
            ("Enabled", _yes_no(a.enabled)),
            ("Current", _version(a.current_version)),
            ("Latest", _version(a.latest_version)),
            ("Created", timestamp(a.create_time)),
            ("Updated", timestamp(a.update_time)),
        ]
    )


def _permissions(version: action_pb2.ActionVersion) -> str:
    return ", ".join(version.permissions) or EMPTY


def versions_table(versions: Sequence[action_pb2.ActionVersion]) -> str:
    if not versions:
        return "No versions."
    rows = [
        (
            v.version,
            v.sha256[:SHORT_HASH],
            size(v.size_bytes),
            _status(v.review_status),
            v.signature_status,
            _permissions(v),
            v.uploaded_by,
            timestamp(v.create_time),
        )
        for v in versions
    ]
    return render_table(VERSION_HEADERS, rows, max_width=CELL_WIDTH)


def _signature(v: action_pb2.ActionVersion) -> str:
    if v.key_fingerprint:
        return f"{v.signature_status} ({v.key_fingerprint})"
    return v.signature_status


def version_detail(v: action_pb2.ActionVersion) -> str:
    fields = [
        ("Action", v.action_name),
        ("Action ID", v.action_id),
        ("Version", v.version),
        ("SHA-256", v.sha256),
        ("Size", f"{size(v.size_bytes)} ({v.size_bytes} bytes)"),
        ("Permissions", _permissions(v)),
        ("Signature", _signature(v)),
        ("Uploaded by", v.uploaded_by),
        ("Created", timestamp(v.create_time)),
        ("Review", _status(v.review_status)),
        ("Reviewed by", v.reviewed_by),
        ("Reviewed", timestamp(v.review_time)),
        ("Comment", v.review_comment),
    ]
    if v.reviews:
        rows = [
            (timestamp(r.time), _status(r.from_status), _status(r.to_status), r.actor, r.comment)
            for r in v.reviews
        ]
        history = render_table(REVIEW_HEADERS, rows, max_width=CELL_WIDTH)
    else:
        history = "No reviews yet."
    return f"{render_fields(fields)}\n\nReview history:\n{history}"


def upload_outcome(response: action_service_pb2.UploadActionVersionResponse) -> str:
    v = response.version
    if response.outcome == action_service_pb2.UPLOAD_OUTCOME_UNCHANGED:
        return f"UNCHANGED: same module and permissions as version {v.version}"
    return (
        f"created version {v.version} (sha256 {v.sha256}, size {size(v.size_bytes)}, "
        f"signature {v.signature_status}, {_status(v.review_status)})"
    )


def review_outcome(v: action_pb2.ActionVersion) -> str:
    return f"version {v.version} of {v.action_name} is now {_status(v.review_status)}"


def usages_table(usages: Sequence[action_pb2.ActionUsage]) -> str:
    if not usages:
        return "No workflows use this action."
    rows = [
        (
            u.workflow_id,
            u.project_id,
            u.workflow_name,
            u.workflow_status,
            _yes_no(u.in_draft),
            _yes_no(u.in_published),
        )
        for u in usages
    ]
    return render_table(USAGE_HEADERS, rows)


def simulation(response: action_service_pb2.SimulateActionResponse) -> str:
    r = response.result
    fields: list[tuple[str, object]] = [("Result", "ok" if r.ok else "failed")]
    if not r.ok:
        fields += [("Reason", r.failure_reason), ("Message", r.failure_message)]
    fields += [
        ("Version", response.version),
        ("Output", r.output_json),
        ("Projection", r.projection_json),
        ("Derived event", r.derived_event_json),
        ("Fuel used", f"{r.fuel_used:,}"),
        ("Duration", micros(r.duration_us)),
        ("Peak memory", size(r.peak_memory_bytes)),
    ]
    return render_fields(fields)
