"""``eventflow dlq ...``: events whose workflow failed for good (DeadLetterService).

Entries are inspected, then either redriven -- a new instance of the same
workflow version for the same event -- or discarded.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from eventflow.orchestrator.v1 import instance_service_pb2 as pb

from cli import orchestrator_views as views
from cli.client import collect_pages
from cli.context import Context, Handler
from cli.options import add_paging, requested_page_size

STATUSES = ("open", "redriven", "discarded", "all")


def list_(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:

        def fetch(token: str) -> pb.ListDeadLettersResponse:
            request = pb.ListDeadLettersRequest(
                project_id=ctx.settings.project,
                workflow_id=args.workflow or "",
                reason=args.reason or "",
                status=args.status or "",
                page_size=requested_page_size(args),
                page_token=token,
            )
            if args.since:
                request.create_after.FromDatetime(args.since)
            if args.until:
                request.create_before.FromDatetime(args.until)
            return client.call(client.dead_letters.ListDeadLetters, request)

        response = collect_pages(fetch, lambda r: r.dead_letters, args.page_token, args.all)
    ctx.emit(response, lambda: views.dead_letter_list(response.dead_letters))
    ctx.more_hint(response)
    return 0


def show(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(
            client.dead_letters.GetDeadLetter, pb.GetDeadLetterRequest(id=args.id)
        )
    ctx.emit(response.dead_letter, lambda: views.dead_letter_detail(response.dead_letter))
    return 0


def redrive(args: argparse.Namespace, ctx: Context) -> int:
    request = pb.RedriveDeadLetterRequest(id=args.id, from_start=args.from_start)
    with ctx.connect() as client:
        response = client.call(client.dead_letters.RedriveDeadLetter, request)
    # The bare id, so `eventflow instances log $(eventflow dlq redrive ID)` works.
    ctx.emit(response, lambda: response.instance_id)
    return 0


def discard(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(
            client.dead_letters.DiscardDeadLetter, pb.DiscardDeadLetterRequest(id=args.id)
        )
    ctx.emit(response.dead_letter, lambda: f"discarded dead letter {args.id}")
    return 0


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    group = commands.add_parser(
        "dlq", help="inspect, redrive or discard events whose workflow failed for good"
    )
    sub = group.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    def leaf(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, parents=[common], help=help_, description=help_)
        parser.set_defaults(handler=handler)
        return parser

    def with_id(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        parser = leaf(name, handler, help_)
        parser.add_argument("id", metavar="ID", help="dead letter id")
        return parser

    p = leaf("list", list_, "list dead letters, newest first")
    p.add_argument("--workflow", metavar="W", help="only this workflow's entries")
    p.add_argument("--reason", metavar="R", help="only this reason, e.g. FUEL_EXHAUSTED")
    p.add_argument("--status", choices=STATUSES, help="entries in this state (default: open)")
    p.add_argument(
        "--since", type=_timestamp, metavar="TIME", help="created at or after (ISO 8601)"
    )
    p.add_argument("--until", type=_timestamp, metavar="TIME", help="created before (ISO 8601)")
    add_paging(p)

    with_id("show", show, "show an entry with its full error")
    p = with_id("redrive", redrive, "run the workflow again for the event; prints the instance id")
    p.add_argument(
        "--from-start", action="store_true", help="rerun every step (default: from the failed one)"
    )
    with_id("discard", discard, "close an entry without rerunning it")


def _timestamp(text: str) -> datetime:
    """ISO 8601; a time without an offset is taken as UTC."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)
