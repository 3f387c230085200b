"""The vault's own schema: migrations apply once and again, and the table
constraints refuse half-written envelopes."""

from __future__ import annotations

import psycopg
import pytest

from libs.db import apply_migrations
from services.vault.server import MIGRATIONS, SCHEMA
from tests.vault.conftest import VaultServer


def test_the_vault_ships_numbered_migrations_for_its_own_schema() -> None:
    assert SCHEMA == "vault"
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))


async def test_applying_the_migrations_again_changes_nothing(vault: VaultServer) -> None:
    async with await psycopg.AsyncConnection.connect(vault.database_url) as conn:
        assert await apply_migrations(conn, SCHEMA, MIGRATIONS) == []
    tables = await vault.sql(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'vault'"
    )
    assert {t for (t,) in tables} == {
        "schema_migrations",
        "secrets",
        "secret_versions",
        "retired_key_versions",
        "audit_events",
    }


async def test_an_envelope_is_stored_whole_or_not_at_all(vault: VaultServer) -> None:
    await vault.sql(
        "INSERT INTO vault.secrets (organization_id, action, key, latest_version, updated_by)"
        " VALUES ('schema-test', 'a', 'K', 1, 'test')"
    )
    with pytest.raises(psycopg.errors.CheckViolation):
        await vault.sql(
            "INSERT INTO vault.secret_versions (organization_id, action, key, version,"
            " created_by, format, kek_version, ciphertext)"
            " VALUES ('schema-test', 'a', 'K', 1, 'test', 1, 1, 'x')"
        )
