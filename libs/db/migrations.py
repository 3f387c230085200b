"""Versioned, per-service SQL migrations.

Each service owns one PostgreSQL schema and ships ``NNNN_name.sql`` files.
``apply_migrations`` runs the ones not yet applied, each in its own
transaction, and records them in ``<schema>.schema_migrations``. It is safe
to call at every start-up and from several processes at once: an advisory
lock serialises concurrent starters, and an applied file whose text has
since changed is refused rather than silently skipped.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class MigrationError(RuntimeError):
    pass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(directory: Path) -> list[Migration]:
    if not directory.is_dir():
        raise MigrationError(f"{directory}: no such migrations folder")
    migrations = []
    for path in sorted(directory.glob("*.sql")):
        match = _FILE.match(path.name)
        if not match:
            raise MigrationError(f"{path}: migration files are named NNNN_name.sql")
        migrations.append(Migration(int(match[1]), match[2], path.read_text()))
    versions = [m.version for m in migrations]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"{directory}: duplicate migration versions")
    return migrations


async def apply_migrations(
    conn: psycopg.AsyncConnection, schema: str, migrations: list[Migration]
) -> list[Migration]:
    """Apply what is missing; return the migrations applied by this call."""
    digest = hashlib.sha256(f"migrate:{schema}".encode()).digest()
    lock_key = int.from_bytes(digest[:8], "big", signed=True)
    await conn.set_autocommit(True)
    await conn.execute("SELECT pg_advisory_lock(%s)", (lock_key,))
    try:
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        await conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(sql.Identifier(schema))
        )
        cur = conn.cursor(row_factory=tuple_row)
        await cur.execute(
            sql.SQL("SELECT version, checksum FROM {}.schema_migrations").format(
                sql.Identifier(schema)
            )
        )
        applied: dict[int, str] = dict(await cur.fetchall())
        done = []
        for migration in migrations:
            if migration.version in applied:
                if applied[migration.version] != migration.checksum:
                    raise MigrationError(
                        f"{schema} migration {migration.version:04d}_{migration.name} was "
                        "changed after it was applied; add a new migration instead"
                    )
                continue
            async with conn.transaction():
                await conn.execute(
                    sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema))
                )
                await conn.execute(migration.sql.encode())
                await conn.execute(
                    sql.SQL(
                        "INSERT INTO {}.schema_migrations (version, name, checksum)"
                        " VALUES (%s, %s, %s)"
                    ).format(sql.Identifier(schema)),
                    (migration.version, migration.name, migration.checksum),
                )
            done.append(migration)
        return done
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key,))
