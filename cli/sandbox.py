"""``eventflow sandbox reset``: empty a project's sandbox (SandboxService).

Deleting cannot be undone, so a person at a terminal is asked first; a
script must say ``--yes``, since there is nobody to ask.
"""

from __future__ import annotations

import argparse

from eventflow.orchestrator.v1 import sandbox_service_pb2 as pb

from cli.context import Context
from cli.errors import UsageError
from cli.output import render_fields

EXIT_DECLINED = 1


def reset(args: argparse.Namespace, ctx: Context) -> int:
    project = ctx.settings.project
    if not args.yes:
        if not ctx.stdin.isatty():
            raise UsageError("sandbox reset deletes data: pass --yes to confirm without a terminal")
        if not _confirmed(ctx, project):
            ctx.note("cancelled: nothing was deleted")
            return EXIT_DECLINED
    with ctx.connect() as client:
        response = client.call(
            client.sandbox.ResetSandbox, pb.ResetSandboxRequest(project_id=project)
        )
    ctx.emit(
        response,
        lambda: (
            f"reset the sandbox of {_named(project)}; deleted:\n"
            + render_fields(
                [
                    ("events", response.events_deleted),
                    ("instances", response.instances_deleted),
                    ("dead letters", response.dead_letters_deleted),
                    ("projections", response.projections_deleted),
                ]
            )
        ),
    )
    return 0


def _confirmed(ctx: Context, project: str) -> bool:
    print(
        f"Delete every sandbox event, instance (with its log and timers), dead letter and"
        f" projection of {_named(project)}? Production is not touched. [y/N] ",
        end="",
        file=ctx.err,
        flush=True,
    )
    return ctx.stdin.readline().strip().lower() in ("y", "yes")


def _named(project: str) -> str:
    return f"project {project}" if project else "the API key's project"


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    group = commands.add_parser("sandbox", help="manage a project's sandbox environment")
    sub = group.add_subparsers(dest="verb", metavar="COMMAND", required=True)
    help_ = "delete the project's sandbox events, instances, dead letters and projections"
    parser = sub.add_parser("reset", parents=[common], help=help_, description=help_)
    parser.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    parser.set_defaults(handler=reset)
