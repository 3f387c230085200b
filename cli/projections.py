"""``eventflow projections ...``: read models written by custom actions (ProjectionService).

A keyed projection is named by NAME TYPE ID (its entity); ``history`` shows
every write to one, with the event and instance that made it.
"""

from __future__ import annotations

import argparse

from eventflow.orchestrator.v1 import projection_service_pb2 as pb

from cli import projection_views as views
from cli.client import collect_pages
from cli.context import Context, Handler
from cli.options import add_paging, requested_page_size

ENVIRONMENTS = ("production", "sandbox")
CUT_NOTE = "note: long data is cut short; --output json shows it whole"


def get(args: argparse.Namespace, ctx: Context) -> int:
    request = pb.GetProjectionRequest(
        project_id=ctx.settings.project,
        environment=args.env or "",
        name=args.name,
        entity_type=args.type,
        entity_id=args.id,
    )
    with ctx.connect() as client:
        response = client.call(client.projections.GetProjection, request)
    ctx.emit(response.projection, lambda: views.projection_detail(response.projection))
    return 0


def list_(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:

        def fetch(token: str) -> pb.ListProjectionsResponse:
            request = pb.ListProjectionsRequest(
                project_id=ctx.settings.project,
                environment=args.env or "",
                name=args.name,
                entity_type=args.type or "",
                status=args.status or "",
                page_size=requested_page_size(args),
                page_token=token,
            )
            return client.call(client.projections.ListProjections, request)

        response = collect_pages(fetch, lambda r: r.projections, args.page_token, args.all)
    ctx.emit(response, lambda: views.projection_list(response.projections))
    if not ctx.json and views.data_is_cut([p.data_json for p in response.projections]):
        ctx.note(CUT_NOTE)
    ctx.more_hint(response)
    return 0


def history(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:

        def fetch(token: str) -> pb.ListProjectionHistoryResponse:
            request = pb.ListProjectionHistoryRequest(
                project_id=ctx.settings.project,
                environment=args.env or "",
                name=args.name,
                entity_type=args.type,
                entity_id=args.id,
                page_size=requested_page_size(args),
                page_token=token,
            )
            return client.call(client.projections.ListProjectionHistory, request)

        response = collect_pages(fetch, lambda r: r.writes, args.page_token, args.all)
    ctx.emit(response, lambda: views.write_list(response.writes))
    if not ctx.json and views.data_is_cut([w.data_json for w in response.writes]):
        ctx.note(CUT_NOTE)
    ctx.more_hint(response)
    return 0


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    group = commands.add_parser(
        "projections", help="read the projections (read models) custom actions write"
    )
    sub = group.add_subparsers(dest="verb", metavar="COMMAND", required=True)

    def leaf(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, parents=[common], help=help_, description=help_)
        parser.add_argument("name", metavar="NAME", help="projection name, e.g. orders")
        parser.add_argument("--env", choices=ENVIRONMENTS, help="environment (default: production)")
        parser.set_defaults(handler=handler)
        return parser

    def keyed(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        parser = leaf(name, handler, help_)
        parser.add_argument("type", metavar="TYPE", help="entity type, e.g. order")
        parser.add_argument("id", metavar="ID", help="entity id")
        return parser

    keyed("get", get, "show one projection by its entity")
    p = leaf("list", list_, "list the projections of one name, newest update first")
    p.add_argument("--type", metavar="T", help="only this entity type")
    p.add_argument("--status", metavar="S", help="only this status")
    add_paging(p)
    p = keyed("history", history, "show every write to one projection, newest first")
    add_paging(p)
