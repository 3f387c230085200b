"""``eventflow workflows test``: try a workflow on a payload (TestRunService).

``--dry-run`` prints what would happen: the re-entry decision and, per step,
the action version that would run, the webhook addresses the egress guard
allows, or why the step could not run. ``--hot-run`` runs the workflow for
real, marked as a test, and prints the test event and instance; ``--wait``
then follows the instance until it ends.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from eventflow.orchestrator.v1 import instance_service_pb2 as ins
from eventflow.orchestrator.v1 import test_run_service_pb2 as pb

from cli import orchestrator_views
from cli.client import Client
from cli.context import Context
from cli.errors import CommandError, UsageError
from cli.options import positive_int
from cli.output import EMPTY, duration, print_json, render_fields, render_table

MAX_PAYLOAD_BYTES = 1024 * 1024
TERMINAL = ("completed", "failed", "canceled")
POLL_INTERVAL_S = 0.5
STEP_HEADERS = ("#", "NAME", "TYPE", "RUNS", "ATTEMPTS", "WHAT", "PROBLEM")


def run(args: argparse.Namespace, ctx: Context) -> int:
    if args.wait and not args.hot_run:
        raise UsageError("--wait follows a hot run's instance; use it with --hot-run")
    payload = load_payload(args.payload, ctx)
    with ctx.connect() as client:
        stub = client.test_runs
        if not args.hot_run:
            request = pb.DryRunWorkflowRequest(
                workflow_id=args.id, draft=args.draft, payload_json=payload
            )
            plan = client.call(stub.DryRunWorkflow, request)
            ctx.emit(plan, lambda: dry_run_view(plan))
            return 0
        started = client.call(
            stub.HotRunWorkflow,
            pb.HotRunWorkflowRequest(workflow_id=args.id, draft=args.draft, payload_json=payload),
        )
        if not args.wait:
            ctx.emit(started, lambda: hot_run_view(started))
            return 0
        if not ctx.json:
            print(hot_run_view(started), file=ctx.out, flush=True)
        instance = _follow(client, started.instance_id, args.timeout)
    if ctx.json:
        print_json(instance, ctx.out)
    else:
        print(f"\n{orchestrator_views.instance_detail(instance)}", file=ctx.out)
    if instance.status not in TERMINAL:
        raise CommandError(f"instance {instance.id} still {instance.status} after {args.timeout} s")
    # A script waiting on a hot run learns from the exit code whether it passed.
    return 0 if instance.status == "completed" else 1


def _follow(client: Client, instance_id: str, timeout_s: int) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        found = client.call(client.instances.GetInstance, ins.GetInstanceRequest(id=instance_id))
        if found.instance.status in TERMINAL or time.monotonic() >= deadline:
            return found.instance
        time.sleep(POLL_INTERVAL_S)


def load_payload(value: str, ctx: Context) -> str:
    """``--payload``: a JSON object inline or as ``@FILE`` (``@-``: stdin), sent verbatim."""
    if value.startswith("@"):
        path = value[1:]
        name = "<stdin>" if path == "-" else path
        try:
            if path == "-":
                text = ctx.stdin.read()
            else:
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
        except FileNotFoundError:
            raise UsageError(f"--payload file not found: {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read --payload file {path}: {exc}") from None
    else:
        text, name = value, "--payload"
    try:
        data = json.loads(text, parse_constant=_not_json)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{name}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except ValueError as exc:
        raise UsageError(f"{name}: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{name}: the payload must be a JSON object, got {_kind(data)}")
    if len(text.encode()) > MAX_PAYLOAD_BYTES:
        raise UsageError(f"{name}: the payload is over 1 MiB ({MAX_PAYLOAD_BYTES} bytes)")
    return text


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "null" if value is None else "number"


def _not_json(literal: str) -> Any:
    raise ValueError(f"{literal} is not a JSON value")


# ------------------------------------------------------------------ views


def dry_run_view(plan: pb.DryRunWorkflowResponse) -> str:
    version = f"version {plan.workflow_version}" if plan.workflow_version else "draft"
    head = render_fields(
        [
            ("Workflow", f"{plan.workflow_id} ({version})"),
            ("Environment", plan.environment),
            ("Trigger", plan.trigger_event),
            ("Re-entry", _reentry(plan.reentry)),
            ("Would run", "yes" if plan.would_run else "no"),
        ]
    )
    rows = [
        (
            orchestrator_views.step_number(s.index),
            s.name,
            s.type,
            "yes" if s.runnable else "no",
            s.max_attempts or EMPTY,
            _what(s),
            f"{s.problem_reason}: {s.problem}" if s.problem_reason else EMPTY,
        )
        for s in plan.steps
    ]
    return f"{head}\n\n{render_table(STEP_HEADERS, rows)}"


def _reentry(decision: pb.ReentryDecision) -> str:
    verdict = "allowed" if decision.allowed else "blocked"
    subject = f"subject {decision.subject}" if decision.subject else "no subject"
    text = f"{decision.mode}, {subject}: {verdict}"
    return f"{text} ({decision.reason})" if decision.reason else text


def _what(step: pb.PlannedStep) -> str:
    if step.type == "custom_action":
        return f"{step.action} v{step.action_version}" if step.action_version else step.action
    if step.type == "webhook":
        targets = ", ".join(step.addresses)
        return f"{step.url} -> {targets}" if targets else step.url
    if step.type == "delay":
        return f"wait {duration(step.duration_ms)}"
    return EMPTY


def hot_run_view(started: pb.HotRunWorkflowResponse) -> str:
    return render_fields([("Event", started.event_id), ("Instance", started.instance_id)])


def register(parser: argparse.ArgumentParser) -> None:
    """The options of ``workflows test ID``."""
    parser.add_argument(
        "--payload",
        required=True,
        metavar="JSON",
        help="the event's data: a JSON object, or @FILE (@- = stdin)",
    )
    parser.add_argument(
        "--draft", action="store_true", help="try the draft instead of the published version"
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--dry-run", action="store_true", help="report what would happen; run and write nothing"
    )
    mode.add_argument("--hot-run", action="store_true", help="run it for real, marked as a test")
    parser.add_argument(
        "--wait", action="store_true", help="with --hot-run: follow the instance until it ends"
    )
    parser.add_argument(
        "--timeout",
        type=positive_int,
        default=300,
        metavar="SECONDS",
        help="how long --wait follows the instance (default: 300)",
    )
