"""The ``eventflow`` command: argument parsing and dispatch.

``main`` never lets an exception or ``SystemExit`` escape for expected
failures; it returns the exit code, so tests and embedding code can call it
like a function. Stack commands (``dev``, ``serve``) import their machinery
lazily: client commands must not pay for loading servers and databases.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn, TextIO

import grpc

from cli import (
    actions,
    admin,
    certs,
    control,
    dlq,
    events,
    instances,
    keyring,
    migrate,
    projections,
    sandbox,
    secrets,
    workflows,
)
from cli.client import open_client
from cli.context import Connect, Context
from cli.errors import CommandError, print_rpc_error
from cli.options import connection_options
from cli.profile import load_profile, resolve

EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    """Never echoes unrecognised arguments: a mistyped `--secrets K=V` holds a secret.

    Subcommand parsers are built with their parent's class, so this covers all.
    """

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments"):
            count = len(message.split(":", 1)[1].split())
            message = f"{count} unrecognized argument(s), not shown as they may hold secrets"
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    common = connection_options()
    parser: argparse.ArgumentParser = _Parser(
        prog="eventflow",
        description="Event-driven workflows: manage workflows and tenants, run the dev stack.",
        parents=[common],
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    workflows.register(commands, common)
    admin_areas = admin.register(commands)
    actions.register(commands)
    events.register(commands, common)
    control.register(commands, common)
    instances.register(commands, common)
    dlq.register(commands, common)
    projections.register(commands, common)
    sandbox.register(commands, common)
    secrets.register(commands, common)
    keyring.register(admin_areas)
    certs.register(commands)
    migrate.register(commands)

    dev = commands.add_parser("dev", help="run the embedded dev stack (all services, one port)")
    dev.set_defaults(stack="dev")
    serve = commands.add_parser("serve", help="run one service")
    serve.add_argument("service", metavar="SERVICE", help="service to run, e.g. registry")
    serve.add_argument("--config", type=Path, metavar="FILE", help="settings file")
    serve.set_defaults(stack="serve")
    return parser


def _run_stack(args: argparse.Namespace) -> int:
    from cli.stack import run_dev, run_serve

    if args.stack == "dev":
        return run_dev(args)
    return run_serve(args.service, args.config)


def run(
    argv: Sequence[str] | None = None,
    *,
    connect: Connect = open_client,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    stdin: TextIO | None = None,
) -> int:
    """``main`` with its surroundings injectable (used by the unit tests)."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    if getattr(args, "stack", None):
        return _run_stack(args)

    settings = resolve(
        server=getattr(args, "server", None),
        api_key=getattr(args, "api_key", None),
        project=getattr(args, "project", None),
        output=getattr(args, "output", None),
        env=os.environ if env is None else env,
        profile=load_profile(cwd),
    )
    ctx = Context(settings, connect, out, err, stdin or sys.stdin)
    try:
        return int(args.handler(args, ctx))
    except CommandError as exc:
        print(f"error: {exc}", file=err)
        return exc.exit_code
    except grpc.RpcError as exc:
        return print_rpc_error(exc, err, has_key=bool(settings.api_key))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
