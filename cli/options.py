"""Options shared by many commands.

The connection options are attached both to the top-level parser and to every
leaf command, so ``eventflow --project p workflows list`` and
``eventflow workflows list --project p`` both work. Their default is
SUPPRESS: a leaf parser then leaves a value given before the subcommand
untouched, and "not given" stays distinguishable from any value, which the
flag > env > profile resolution needs.
"""

from __future__ import annotations

import argparse

OUTPUTS = ("table", "json", "id")


def connection_options(*, with_project: bool = True) -> argparse.ArgumentParser:
    """A parent parser with the global options (``with_project=False`` for
    commands whose own ``--project`` means something else)."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection")
    hide = argparse.SUPPRESS
    group.add_argument(
        "--server", metavar="HOST:PORT", default=hide,
        help="server address (env EVENTFLOW_SERVER; default: dev profile or 127.0.0.1:7233)",
    )  # fmt: skip
    group.add_argument(
        "--api-key", metavar="KEY", default=hide,
        help="API key (env EVENTFLOW_API_KEY; default: dev profile)",
    )  # fmt: skip
    if with_project:
        group.add_argument(
            "--project", metavar="ID", default=hide,
            help="project (env EVENTFLOW_PROJECT; default: dev profile, else the key's project)",
        )  # fmt: skip
    group.add_argument(
        "-o", "--output", choices=OUTPUTS, default=hide,
        help="output format (default: table; id: just the id, for scripts)",
    )  # fmt: skip
    return parent


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def add_paging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--page-size", type=positive_int, metavar="N", help="results per page")
    parser.add_argument("--page-token", default="", metavar="TOKEN", help="continue a listing")
    parser.add_argument("--all", action="store_true", help="follow every page to the end")


def requested_page_size(args: argparse.Namespace) -> int:
    """--page-size as given; with --all and no size, the largest page the API serves."""
    from cli.client import ALL_PAGE_SIZE

    return int(args.page_size or (ALL_PAGE_SIZE if args.all else 0))
