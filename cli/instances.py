"""``eventflow instances ...``: workflow runs, their logs, pause/resume/cancel (InstanceService)."""

from __future__ import annotations

import argparse
from typing import Any

from eventflow.orchestrator.v1 import instance_service_pb2 as pb

from cli import orchestrator_views as views
from cli.client import collect_pages
from cli.context import Context, Handler
from cli.options import add_paging, requested_page_size

STATUSES = ("running", "paused", "completed", "failed", "canceled")


def list_(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:

        def fetch(token: str) -> pb.ListInstancesResponse:
            request = pb.ListInstancesRequest(
                project_id=ctx.settings.project,
                workflow_id=args.workflow or "",
                status=args.status or "",
                page_size=requested_page_size(args),
                page_token=token,
            )
            return client.call(client.instances.ListInstances, request)

        response = collect_pages(fetch, lambda r: r.instances, args.page_token, args.all)
    ctx.emit(response, lambda: views.instance_list(response.instances))
    ctx.more_hint(response)
    return 0


def get(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(client.instances.GetInstance, pb.GetInstanceRequest(id=args.id))
    ctx.emit(response.instance, lambda: views.instance_detail(response.instance))
    return 0


def log(args: argparse.Namespace, ctx: Context) -> int:
    request = pb.ListInstanceLogRequest(instance_id=args.id)
    with ctx.connect() as client:
        response = client.call(client.instances.ListInstanceLog, request)
    ctx.emit(response, lambda: views.log_table(response.entries))
    if not ctx.json and views.log_is_cut(response.entries):
        ctx.note("note: long details are cut short; --output json shows them whole")
    return 0


def pause(args: argparse.Namespace, ctx: Context) -> int:
    return _change(ctx, "PauseInstance", pb.PauseInstanceRequest(id=args.id))


def resume(args: argparse.Namespace, ctx: Context) -> int:
    return _change(ctx, "ResumeInstance", pb.ResumeInstanceRequest(id=args.id))


def cancel(args: argparse.Namespace, ctx: Context) -> int:
    return _change(ctx, "CancelInstance", pb.CancelInstanceRequest(id=args.id))


def _change(ctx: Context, method: str, request: Any) -> int:
    with ctx.connect() as client:
        response = client.call(getattr(client.instances, method), request)
    ctx.emit(response.instance, lambda: views.instance_detail(response.instance))
    return 0


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    group = commands.add_parser(
        "instances", help="list workflow runs, read their logs, pause, resume or cancel them"
    )
    sub = group.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    def leaf(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, parents=[common], help=help_, description=help_)
        parser.set_defaults(handler=handler)
        return parser

    p = leaf("list", list_, "list instances, newest first")
    p.add_argument("--workflow", metavar="W", help="only this workflow's instances")
    p.add_argument("--status", choices=STATUSES)
    add_paging(p)

    p = leaf("get", get, "show an instance")
    p.add_argument("id", metavar="ID", help="instance id")
    p = leaf("log", log, "show every state change of an instance, in order")
    p.add_argument("id", metavar="ID", help="instance id")
    for name, handler, help_ in (
        ("pause", pause, "hold an instance at its next step boundary (a running step finishes)"),
        ("resume", resume, "continue a paused instance from where it held"),
        ("cancel", cancel, "cancel an instance for good"),
    ):
        p = leaf(name, handler, help_)
        p.add_argument("id", metavar="ID", help="instance id")
