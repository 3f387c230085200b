"""``eventflow admin ...``: organizations, projects and API keys (TenancyService)."""

from __future__ import annotations

import argparse
from typing import Any

from eventflow.registry.v1 import tenancy_service_pb2 as ts

from cli.client import collect_pages
from cli.context import Context, Handler
from cli.options import add_paging, connection_options, requested_page_size
from cli.output import EMPTY, render_fields, render_table, timestamp

PLANS = ("starter", "team", "enterprise")
ROLES = ("viewer", "developer", "admin")
SECRET_WARNING = (
    "warning: this is the only time the secret is shown; the server keeps only a hash. "
    "Store it now."
)


def _org_view(org: Any) -> str:
    return render_fields(
        [
            ("ID", org.id),
            ("Name", org.display_name),
            ("Plan", org.plan),
            ("Created", timestamp(org.create_time)),
        ]
    )


def _project_view(project: Any) -> str:
    return render_fields(
        [
            ("ID", project.id),
            ("Organization", project.organization_id),
            ("Name", project.display_name),
            ("Created", timestamp(project.create_time)),
        ]
    )


def _key_fields(key: Any) -> list[tuple[str, object]]:
    return [
        ("ID", key.id),
        ("Organization", key.organization_id),
        ("Project", key.project_id or "(all projects)"),
        ("Role", key.role),
        ("Description", key.description),
        ("Created", timestamp(key.create_time)),
        ("State", "revoked" if key.revoked else "active"),
    ]


def orgs_create(args: argparse.Namespace, ctx: Context) -> int:
    org = ts.Organization(id=args.id, display_name=args.name or "", plan=args.plan or "")
    with ctx.connect() as client:
        response = client.call(
            client.tenancy.CreateOrganization, ts.CreateOrganizationRequest(organization=org)
        )
    ctx.emit(response.organization, lambda: _org_view(response.organization))
    return 0


def orgs_get(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(
            client.tenancy.GetOrganization, ts.GetOrganizationRequest(id=args.id or "")
        )
    ctx.emit(response.organization, lambda: _org_view(response.organization))
    return 0


def orgs_set_plan(args: argparse.Namespace, ctx: Context) -> int:
    request = ts.UpdateOrganizationPlanRequest(id=args.id, plan=args.plan)
    with ctx.connect() as client:
        response = client.call(client.tenancy.UpdateOrganizationPlan, request)
    ctx.emit(response.organization, lambda: _org_view(response.organization))
    return 0


def projects_create(args: argparse.Namespace, ctx: Context) -> int:
    request = ts.CreateProjectRequest(
        organization_id=args.org or "",
        project=ts.Project(id=args.id, display_name=args.name or ""),
    )
    with ctx.connect() as client:
        response = client.call(client.tenancy.CreateProject, request)
    ctx.emit(response.project, lambda: _project_view(response.project))
    return 0


def projects_list(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:

        def fetch(token: str) -> Any:
            request = ts.ListProjectsRequest(
                organization_id=args.org or "",
                page_size=requested_page_size(args),
                page_token=token,
            )
            return client.call(client.tenancy.ListProjects, request)

        response = collect_pages(fetch, lambda r: r.projects, args.page_token, args.all)

    def table() -> str:
        if not response.projects:
            return "No projects."
        rows = [
            (p.id, p.organization_id, p.display_name, timestamp(p.create_time))
            for p in response.projects
        ]
        return render_table(("ID", "ORG", "NAME", "CREATED"), rows)

    ctx.emit(response, table)
    return 0


def keys_create(args: argparse.Namespace, ctx: Context) -> int:
    # Only an explicit --project scopes the key: taking the profile's project
    # silently would turn an intended organization-wide key into a narrow one.
    request = ts.CreateApiKeyRequest(
        organization_id=args.org or "",
        project_id=getattr(args, "project", ""),
        role=args.role,
        description=args.description or "",
    )
    with ctx.connect() as client:
        response = client.call(client.tenancy.CreateApiKey, request)
    fields = [*_key_fields(response.api_key), ("Secret", response.secret)]
    ctx.emit(response, lambda: render_fields(fields))
    ctx.note(SECRET_WARNING)
    return 0


def keys_list(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:

        def fetch(token: str) -> Any:
            request = ts.ListApiKeysRequest(
                organization_id=args.org or "",
                page_size=requested_page_size(args),
                page_token=token,
            )
            return client.call(client.tenancy.ListApiKeys, request)

        response = collect_pages(fetch, lambda r: r.api_keys, args.page_token, args.all)

    def table() -> str:
        if not response.api_keys:
            return "No API keys."
        rows = [
            (
                k.id,
                k.organization_id,
                k.project_id or "*",
                k.role,
                "revoked" if k.revoked else "active",
                timestamp(k.create_time),
                k.description or EMPTY,
            )
            for k in response.api_keys
        ]
        headers = ("ID", "ORG", "PROJECT", "ROLE", "STATE", "CREATED", "DESCRIPTION")
        return render_table(headers, rows, max_width=60)

    ctx.emit(response, table)
    return 0


def keys_revoke(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.connect() as client:
        response = client.call(client.tenancy.RevokeApiKey, ts.RevokeApiKeyRequest(id=args.key_id))
    ctx.emit(response.api_key, lambda: f"revoked key {response.api_key.id or args.key_id}")
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> Any:
    """Add ``admin``; returns its area group so other modules can add areas to it."""
    # Admin commands take their scope from --org/--project options of their
    # own, so the global --project is left out of their parents.
    common = connection_options(with_project=False)
    admin = commands.add_parser("admin", help="organizations, projects and API keys")
    areas = admin.add_subparsers(dest="area", metavar="AREA", required=True)

    def group(name: str, help_: str) -> Any:
        parser = areas.add_parser(name, help=help_, description=help_)
        return parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def leaf(sub: Any, name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(
            name, parents=[common], help=help_, description=help_
        )
        parser.set_defaults(handler=handler)
        return parser

    orgs = group("orgs", "organizations (creation and plans need the operator token)")
    p = leaf(orgs, "create", orgs_create, "create an organization")
    p.add_argument("id", metavar="ID", help="lowercase slug")
    p.add_argument("--name", help="display name")
    p.add_argument("--plan", choices=PLANS)
    p = leaf(orgs, "get", orgs_get, "show an organization (default: the key's own)")
    p.add_argument("id", metavar="ID", nargs="?")
    p = leaf(orgs, "set-plan", orgs_set_plan, "change an organization's plan")
    p.add_argument("id", metavar="ID")
    p.add_argument("plan", metavar="PLAN", choices=PLANS, help=" | ".join(PLANS))

    projects = group("projects", "projects of an organization")
    p = leaf(projects, "create", projects_create, "create a project")
    p.add_argument("id", metavar="ID", help="lowercase slug")
    p.add_argument("--name", help="display name")
    p.add_argument("--org", metavar="ORG", help="organization (default: the key's)")
    p = leaf(projects, "list", projects_list, "list projects")
    p.add_argument("--org", metavar="ORG", help="organization (default: the key's)")
    add_paging(p)

    keys = group("keys", "API keys")
    p = leaf(keys, "create", keys_create, "create an API key and show its secret once")
    p.add_argument("--role", required=True, choices=ROLES)
    p.add_argument(
        "--project", metavar="P", default=argparse.SUPPRESS,
        help="limit the key to one project (default: every project of the organization)",
    )  # fmt: skip
    p.add_argument("--org", metavar="ORG", help="organization (default: the key's)")
    p.add_argument("--description", metavar="D", help="what the key is for")
    p = leaf(keys, "list", keys_list, "list API keys (never their secrets)")
    p.add_argument("--org", metavar="ORG", help="organization (default: the key's)")
    add_paging(p)
    p = leaf(keys, "revoke", keys_revoke, "revoke an API key")
    p.add_argument("key_id", metavar="KEY_ID")
    return areas
