"""``eventflow secrets ...``: write-only secrets of custom actions (SecretService).

A value is never a command-line argument: argv lands in shell history, in
``ps`` output and in CI logs. ``set`` reads it from ``--value-file`` or
stdin (a prompt without echo on a terminal), and nothing prints it back.
"""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from eventflow.vault.v1 import secret_service_pb2 as ss

from cli.client import ALL_PAGE_SIZE, collect_pages
from cli.context import Context, Handler
from cli.errors import UsageError
from cli.options import add_paging
from cli.output import render_table, timestamp

VALUE_ON_COMMAND_LINE = (
    "a secret value is never taken from the command line (shell history, `ps` and CI logs"
    " keep it): pipe it on stdin or pass --value-file FILE"
)

_STATES = {
    ss.SECRET_VERSION_STATE_CURRENT: "current",
    ss.SECRET_VERSION_STATE_SUPERSEDED: "superseded",
    ss.SECRET_VERSION_STATE_DESTROYED: "destroyed",
}


class _RefuseValue(argparse.Action):
    """``--value X``: refused with a hint, and without repeating X."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        parser.error(VALUE_ON_COMMAND_LINE)


def _read_value(args: argparse.Namespace, ctx: Context) -> str:
    if args.stray:
        raise UsageError(VALUE_ON_COMMAND_LINE)
    if args.value_file and args.value_file != "-":
        try:
            with open(args.value_file, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not UTF-8 text"
            raise UsageError(f"cannot read {args.value_file}: {reason}") from None
    elif not args.value_file and ctx.stdin.isatty():
        text = getpass.getpass(f"value of {args.key} (not echoed): ")
    else:
        text = ctx.stdin.read()
    if not args.raw:
        # `echo "$TOKEN" | eventflow secrets set ...` must not store the newline.
        text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise UsageError("no value given: pipe it on stdin or pass --value-file FILE")
    return text


def set_(args: argparse.Namespace, ctx: Context) -> int:
    value = _read_value(args, ctx)
    request = ss.SetSecretRequest(
        organization_id=args.org or "", action=args.action_name, key=args.key, value=value
    )
    with ctx.connect() as client:
        response = client.call(client.secrets.SetSecret, request)
    secret = response.secret
    ctx.emit(
        secret, lambda: f"set {secret.key} of action {secret.action}: version {secret.version}"
    )
    return 0


def list_(args: argparse.Namespace, ctx: Context) -> int:
    size = args.page_size or (ALL_PAGE_SIZE if args.all else 0)
    with ctx.connect() as client:

        def fetch(token: str) -> Any:
            request = ss.ListSecretsRequest(
                organization_id=args.org or "",
                action=args.action_name or "",
                page_size=size,
                page_token=token,
            )
            return client.call(client.secrets.ListSecrets, request)

        response = collect_pages(fetch, lambda r: r.secrets, args.page_token, args.all)

    def table() -> str:
        if not response.secrets:
            return "No secrets."
        rows = [
            (
                s.action,
                s.key,
                s.version,
                timestamp(s.create_time),
                timestamp(s.update_time),
                s.updated_by,
            )
            for s in response.secrets
        ]
        return render_table(("ACTION", "KEY", "VERSION", "CREATED", "UPDATED", "BY"), rows)

    ctx.emit(response, table)
    ctx.more_hint(response)
    return 0


def versions(args: argparse.Namespace, ctx: Context) -> int:
    size = args.page_size or (ALL_PAGE_SIZE if args.all else 0)
    with ctx.connect() as client:

        def fetch(token: str) -> Any:
            request = ss.ListSecretVersionsRequest(
                organization_id=args.org or "",
                action=args.action_name,
                key=args.key,
                page_size=size,
                page_token=token,
            )
            return client.call(client.secrets.ListSecretVersions, request)

        response = collect_pages(fetch, lambda r: r.versions, args.page_token, args.all)

    def table() -> str:
        rows = [
            (
                v.version,
                _STATES.get(v.state, "?"),
                timestamp(v.create_time),
                v.created_by,
                timestamp(v.destroy_time),
            )
            for v in response.versions
        ]
        return render_table(("VERSION", "STATE", "CREATED", "BY", "DESTROYED"), rows)

    ctx.emit(response, table)
    ctx.more_hint(response)
    return 0


def delete(args: argparse.Namespace, ctx: Context) -> int:
    request = ss.DeleteSecretRequest(
        organization_id=args.org or "", action=args.action_name, key=args.key
    )
    with ctx.connect() as client:
        response = client.call(client.secrets.DeleteSecret, request)
    ctx.emit(
        response,
        lambda: (
            f"deleted {args.key} of action {args.action_name}"
            f" ({response.destroyed_versions} version(s) destroyed)"
        ),
    )
    return 0


def purge(args: argparse.Namespace, ctx: Context) -> int:
    request = ss.PurgeSecretVersionsRequest(
        organization_id=args.org or "", action=args.action_name, key=args.key
    )
    with ctx.connect() as client:
        response = client.call(client.secrets.PurgeSecretVersions, request)
    ctx.emit(
        response,
        lambda: (
            f"destroyed {response.destroyed_versions} older version(s) of {args.key};"
            f" version {response.current_version} is still served"
        ),
    )
    return 0


def register(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    group = commands.add_parser(
        "secrets",
        help="write-only secrets of custom actions",
        description="Secrets of custom actions, per organization and action. Values are"
        " write-only: no command prints one.",
    )
    sub = group.add_subparsers(dest="secrets_command", metavar="COMMAND", required=True)

    def leaf(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, parents=[common], help=help_, description=help_)
        parser.set_defaults(handler=handler)
        parser.add_argument("--org", metavar="ORG", help="organization (operator only)")
        return parser

    def named(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        parser = leaf(name, handler, help_)
        parser.add_argument("action_name", metavar="ACTION", help="the custom action's name")
        parser.add_argument("key", metavar="KEY", help="secret key, e.g. RISK_THRESHOLD")
        return parser

    p = named(
        "set",
        set_,
        "store a new version of a secret; the value comes from stdin or --value-file",
    )
    p.add_argument("--value-file", metavar="FILE", help="read the value from FILE (- = stdin)")
    p.add_argument(
        "--raw", action="store_true", help="keep a trailing newline (default: strip one)"
    )
    # Catch the value where people would try to put it, to refuse it politely.
    p.add_argument("--value", nargs="?", action=_RefuseValue, help=argparse.SUPPRESS)
    p.add_argument("stray", nargs="*", help=argparse.SUPPRESS)
    p.epilog = (
        'examples: printf %s "$TOKEN" | eventflow secrets set score-order API_TOKEN;'
        " eventflow secrets set score-order TLS_KEY --value-file key.pem --raw"
    )

    p = leaf("list", list_, "list secrets (keys and versions, never values)")
    p.add_argument("action_name", metavar="ACTION", nargs="?", help="only this action's")
    add_paging(p)

    p = named("versions", versions, "list a secret's versions, newest first")
    add_paging(p)
    named("delete", delete, "stop serving a secret and destroy every version")
    named("purge", purge, "destroy every version of a secret but the current one")
