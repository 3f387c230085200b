"""`eventflow migrate`, what the Kubernetes Job and the compose `migrate` service run,
against a real PostgreSQL."""

from __future__ import annotations

import io
import socket

import psycopg
import pytest

from cli.main import run
from cli.stack import MIGRATIONS
from tests.conftest import create_database

DATABASE_ENV = "EVENTFLOW_DATABASE_URL"


def migrate(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(["migrate", *args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def applied_versions(database_url: str) -> dict[str, list[int]]:
    """Each schema's applied migration versions (schemas that do not exist are left out)."""
    found = {}
    with psycopg.connect(database_url) as conn:
        for service, (schema, _) in MIGRATIONS.items():
            exists = conn.execute(
                "SELECT 1 FROM information_schema.tables"
                " WHERE table_schema = %s AND table_name = 'schema_migrations'",
                (schema,),
            ).fetchone()
            if exists:
                rows = conn.execute(
                    f'SELECT version FROM "{schema}".schema_migrations ORDER BY version'
                ).fetchall()
                found[service] = [version for (version,) in rows]
    return found


@pytest.fixture
def database_url(postgres_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    url = create_database(postgres_server)
    monkeypatch.setenv(DATABASE_ENV, url)
    return url


def test_migrate_applies_every_services_migrations(database_url: str) -> None:
    code, out, _ = migrate()
    assert code == 0
    assert applied_versions(database_url) == {
        service: [m.version for m in migrations] for service, (_, migrations) in MIGRATIONS.items()
    }
    for service, (_, migrations) in MIGRATIONS.items():
        first = migrations[0]
        assert f"{service}: applied {first.version:04d}_{first.name}" in out
    assert "executor: no database schema" in out


def test_migrating_again_changes_nothing(database_url: str) -> None:
    assert migrate()[0] == 0
    before = applied_versions(database_url)
    code, out, _ = migrate()
    assert code == 0
    assert applied_versions(database_url) == before
    assert "applied" not in out
    for service, (_, migrations) in MIGRATIONS.items():
        assert f"{service}: up to date ({len(migrations)} migrations)" in out


def test_migrate_one_service_leaves_the_others_alone(database_url: str) -> None:
    code, out, _ = migrate("vault")
    assert code == 0
    assert list(applied_versions(database_url)) == ["vault"]
    assert "registry" not in out


def test_an_unknown_service_is_a_usage_error_and_touches_nothing(database_url: str) -> None:
    code, _, err = migrate("vault", "billing")
    assert code == 2
    assert "unknown service 'billing'" in err
    assert applied_versions(database_url) == {}


def test_a_changed_migration_is_refused(database_url: str) -> None:
    assert migrate("registry")[0] == 0
    schema, _ = MIGRATIONS["registry"]
    with psycopg.connect(database_url) as conn:
        conn.execute(f'UPDATE "{schema}".schema_migrations SET checksum = %s', ("edited",))
    code, _, err = migrate("registry")
    assert code == 1
    assert "was changed after it was applied" in err


def test_without_a_database_url_nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    code, _, err = migrate()
    assert code == 2
    assert "EVENTFLOW_DATABASE_URL is required" in err


def test_an_unreachable_database_fails_without_showing_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    password = "hunter2-do-not-print"
    monkeypatch.setenv(DATABASE_ENV, f"postgresql://eventflow:{password}@127.0.0.1:{port}/x")
    code, out, err = migrate()
    assert code == 1
    assert err.startswith("error: cannot migrate:")
    assert password not in out + err
