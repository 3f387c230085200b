"""``eventflow pause|resume|cancel --subject S | --project | --org`` and ``eventflow holds``.

Scoped operations on instances (InstanceService). ``--org`` is the
emergency stop and needs an admin key; cancel asks for confirmation on a
terminal (``--yes`` skips it) because canceled instances cannot come back.
"""

from __future__ import annotations

import argparse

from eventflow.orchestrator.v1 import instance_service_pb2 as pb

from cli.context import Context, Handler
from cli.errors import UsageError
from cli.options import connection_options
from cli.output import render_table, timestamp


def _project(args: argparse.Namespace, ctx: Context) -> str:
    return str(args.scope_project or ctx.settings.project or "")


def _scope(args: argparse.Namespace, ctx: Context) -> pb.InstanceScope:
    if args.org:
        return pb.InstanceScope(organization=True)
    return pb.InstanceScope(project_id=_project(args, ctx), subject=args.subject or "")


def _what(args: argparse.Namespace, ctx: Context) -> str:
    if args.org:
        return "every instance of the organization"
    project = _project(args, ctx) or "the key's project"
    if args.subject:
        return f"instances for subject {args.subject!r} in {project}"
    return f"every instance of project {project}"


def pause(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(
            client.instances.PauseInstances, pb.PauseInstancesRequest(scope=_scope(args, ctx))
        )
    ctx.emit(
        response,
        lambda: (
            f"paused {response.paused} running instance(s); {_what(args, ctx)} now holds"
            " at the next step boundary until resumed"
        ),
    )
    return 0


def resume(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(
            client.instances.ResumeInstances, pb.ResumeInstancesRequest(scope=_scope(args, ctx))
        )
    ctx.emit(response, lambda: f"resumed {response.resumed} instance(s)")
    return 0


def cancel(args: argparse.Namespace, ctx: Context) -> int:
    if not args.yes:
        if not ctx.stdin.isatty():
            raise UsageError("cancel cannot be undone: pass --yes to confirm without a terminal")
        ctx.err.write(f"cancel {_what(args, ctx)}? This cannot be undone. [y/N] ")
        ctx.err.flush()
        if ctx.stdin.readline().strip().lower() not in ("y", "yes"):
            ctx.note("nothing canceled")
            return 1
    with ctx.connect() as client:
        response = client.call(
            client.instances.CancelInstances, pb.CancelInstancesRequest(scope=_scope(args, ctx))
        )
    ctx.emit(response, lambda: f"canceled {response.canceled} instance(s)")
    return 0


def holds(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(client.instances.ListHolds, pb.ListHoldsRequest())

    def table() -> str:
        if not response.holds:
            return "no holds: nothing is paused by scope"
        rows = [
            (h.scope, h.project_id or "*", h.subject or "*", timestamp(h.create_time))
            for h in response.holds
        ]
        return render_table(("SCOPE", "PROJECT", "SUBJECT", "SINCE"), rows)

    ctx.emit(response, table)
    return 0


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    # Here --project names the scope, so the leaf takes the connection options
    # without the global --project (which still works before the command).
    connection = connection_options(with_project=False)

    def scoped(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        parser = commands.add_parser(name, parents=[connection], help=help_, description=help_)
        parser.set_defaults(handler=handler)
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--subject", metavar="S", help="instances for this re-entry subject")
        which.add_argument(
            "--project", dest="scope_project", nargs="?", const="", metavar="ID",
            help="every instance of a project (default: the profile's or the key's project)",
        )  # fmt: skip
        which.add_argument(
            "--org", action="store_true",
            help="every instance of the organization (emergency stop; needs admin)",
        )  # fmt: skip
        return parser

    scoped("pause", pause, "pause instances by scope; later ones in the scope hold too")
    scoped("resume", resume, "lift a scope's hold and resume the instances it paused")
    p = scoped("cancel", cancel, "cancel every running or paused instance in a scope")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p = commands.add_parser("holds", parents=[common], help="list the scopes paused now")
    p.set_defaults(handler=holds)
