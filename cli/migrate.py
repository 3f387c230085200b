"""`eventflow migrate [SERVICE ...]`: apply the services' database migrations, then exit.

Every service also migrates when it starts (idempotent, safe for several
replicas at once); this command lets a deployment do it once, ahead of a
rollout: the Kubernetes Job in deploy/k8s and the compose `migrate` service
run it, so replicas start against a schema that is already current.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from pathlib import Path
from typing import Any

from cli.context import Context
from cli.errors import CommandError, UsageError
from libs.config import Settings
from libs.identity import SERVICES


def migrate(args: argparse.Namespace, ctx: Context) -> int:
    import psycopg

    from cli.stack import MIGRATIONS
    from libs.db import MigrationError

    unknown = [name for name in args.services if name not in SERVICES]
    if unknown:
        raise UsageError(f"unknown service {unknown[0]!r}; one of: {', '.join(SERVICES)}")
    try:
        settings = Settings.load(config_file=args.config)
    except (OSError, ValueError) as error:
        raise UsageError(str(error)) from None
    if not settings.database_url:
        raise UsageError("EVENTFLOW_DATABASE_URL is required for `eventflow migrate`")
    services = tuple(args.services) or SERVICES
    try:
        asyncio.run(_apply(settings.database_url, [s for s in services if s in MIGRATIONS], ctx))
    except psycopg.Error as error:
        reason = _redacted(_first_line(error), settings.database_url)
        raise CommandError(f"cannot migrate: {reason}") from None
    except MigrationError as error:
        raise CommandError(str(error)) from None
    for name in services:
        if name not in MIGRATIONS:
            print(f"{name}: no database schema", file=ctx.out)
    return 0


async def _apply(database_url: str, services: list[str], ctx: Context) -> None:
    import psycopg

    from cli.stack import MIGRATIONS
    from libs.db import apply_migrations

    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        for name in services:
            schema, migrations = MIGRATIONS[name]
            applied = await apply_migrations(conn, schema, migrations)
            for migration in applied:
                print(f"{name}: applied {migration.version:04d}_{migration.name}", file=ctx.out)
            if not applied:
                print(f"{name}: up to date ({len(migrations)} migrations)", file=ctx.out)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _redacted(message: str, database_url: str) -> str:
    """libpq names the host it tried, not the password; make sure of it."""
    import psycopg

    try:
        password = psycopg.conninfo.conninfo_to_dict(database_url).get("password")
    except psycopg.Error:
        found = re.match(r"[a-z]+://[^:/@]*:([^@]+)@", database_url)
        password = found[1] if found else None
    return message.replace(str(password), "***") if password else message


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "migrate",
        help="apply the services' database migrations and exit",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "services",
        nargs="*",
        metavar="SERVICE",
        help=f"services to migrate (default: all of {', '.join(SERVICES)})",
    )
    parser.add_argument("--config", type=Path, metavar="FILE", help="settings file (TOML)")
    parser.set_defaults(handler=migrate)
