"""Per-service migrations on a real PostgreSQL: versioned, idempotent, safe to race."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import psycopg
import pytest

from cli.stack import migrate
from libs.db import Migration, MigrationError, apply_migrations, load_migrations
from services.registry.server import MIGRATIONS, SCHEMA
from tests.conftest import create_database


async def tables(url: str, schema: str) -> set[str]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        )
        return {row[0] for row in await cur.fetchall()}


async def test_registry_migrations_apply_once_into_their_own_schema(postgres_server: str) -> None:
    url = create_database(postgres_server)
    await migrate(url)
    created = await tables(url, SCHEMA)
    assert {
        "organizations",
        "projects",
        "api_keys",
        "workflows",
        "workflow_versions",
        "outbox",
        "webhook_secrets",
        "unannounced_projects",
    } <= created
    assert await tables(url, "public") == set()
    await migrate(url)  # second start: nothing to do, nothing breaks
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute(f"SELECT version FROM {SCHEMA}.schema_migrations ORDER BY version")
        assert [row[0] for row in await cur.fetchall()] == [m.version for m in MIGRATIONS]


async def test_upgrading_gives_existing_workflows_a_secret_and_queues_existing_projects(
    postgres_server: str,
) -> None:
    url = create_database(postgres_server)
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await apply_migrations(conn, SCHEMA, MIGRATIONS[:1])
        await conn.execute(
            "INSERT INTO registry.organizations (id, plan) VALUES ('acme', 'team');"
            "INSERT INTO registry.projects (organization_id, id) VALUES ('acme', 'shop');"
            "INSERT INTO registry.workflows (id, organization_id, project_id, name, trigger_event,"
            " environment, status, draft, draft_hash) VALUES (gen_random_uuid(), 'acme', 'shop',"
            " 'w', 'a.b', 'production', 'draft', '{}', 'h'), (gen_random_uuid(), 'acme', 'shop',"
            " 'w2', 'a.b', 'production', 'draft', '{}', 'h')"
        )
        await conn.commit()
    await migrate(url)
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute("SELECT secret, previous_secret FROM registry.webhook_secrets")
        secrets = await cur.fetchall()
        cur = await conn.execute("SELECT * FROM registry.unannounced_projects")
        assert await cur.fetchall() == [("acme", "shop")]
        cur = await conn.execute("SELECT revision FROM registry.organizations")
        assert await cur.fetchall() == [(1,)]
    assert len(secrets) == 2 and secrets[0][0] != secrets[1][0]
    for secret, previous in secrets:
        assert secret.startswith("whsec_") and previous is None
        assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32


async def test_concurrent_starters_apply_each_migration_exactly_once(postgres_server: str) -> None:
    url = create_database(postgres_server)
    migrations = [
        Migration(1, "counter", "CREATE TABLE hits (n int); INSERT INTO hits VALUES (1);"),
        Migration(2, "more", "INSERT INTO hits VALUES (2);"),
    ]

    async def start() -> list[Migration]:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            return await apply_migrations(conn, "racer", migrations)

    results = await asyncio.gather(*(start() for _ in range(4)))
    assert sorted(len(r) for r in results) == [0, 0, 0, 2]
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute("SELECT n FROM racer.hits ORDER BY n")
        assert [row[0] for row in await cur.fetchall()] == [1, 2]


async def test_a_migration_edited_after_it_ran_is_refused(postgres_server: str) -> None:
    url = create_database(postgres_server)
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await apply_migrations(conn, "edited", [Migration(1, "t", "CREATE TABLE t (a int);")])
        with pytest.raises(MigrationError, match="changed after it was applied"):
            await apply_migrations(conn, "edited", [Migration(1, "t", "CREATE TABLE t (b int);")])


async def test_a_failing_migration_leaves_no_trace_and_later_ones_do_not_run(
    postgres_server: str,
) -> None:
    url = create_database(postgres_server)
    migrations = [
        Migration(1, "ok", "CREATE TABLE ok (a int);"),
        Migration(2, "broken", "CREATE TABLE half (a int); SELECT no_such_function();"),
        Migration(3, "after", "CREATE TABLE after (a int);"),
    ]
    async with await psycopg.AsyncConnection.connect(url) as conn:
        with pytest.raises(psycopg.errors.UndefinedFunction):
            await apply_migrations(conn, "partial", migrations)
    assert await tables(url, "partial") == {"ok", "schema_migrations"}


def test_the_registry_ships_well_formed_migration_files() -> None:
    folder = (
        Path(__file__).resolve().parents[2] / "services" / "registry" / "storage" / "migrations"
    )
    assert load_migrations(folder) == MIGRATIONS
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
