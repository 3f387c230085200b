"""Each service ships NNNN_name.sql migrations; loading them checks names and versions."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from libs.db.migrations import Migration, MigrationError, load_migrations

REGISTRY_MIGRATIONS = (
    Path(__file__).resolve().parents[2] / "services" / "registry" / "storage" / "migrations"
)


def write(directory: Path, **files: str) -> Path:
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def test_migrations_load_in_version_order(tmp_path: Path) -> None:
    # Created out of order on purpose.
    write(tmp_path, **{"0003_add_index.sql": "C", "0001_initial.sql": "A", "0002_outbox.sql": "B"})
    migrations = load_migrations(tmp_path)
    assert [(m.version, m.name, m.sql) for m in migrations] == [
        (1, "initial", "A"),
        (2, "outbox", "B"),
        (3, "add_index", "C"),
    ]


def test_versions_order_numerically_across_digit_boundaries(tmp_path: Path) -> None:
    write(tmp_path, **{"0010_ten.sql": "", "0009_nine.sql": "", "0100_hundred.sql": ""})
    assert [m.version for m in load_migrations(tmp_path)] == [9, 10, 100]


def test_an_empty_directory_has_no_migrations(tmp_path: Path) -> None:
    assert load_migrations(tmp_path) == []


def test_files_that_are_not_sql_are_ignored(tmp_path: Path) -> None:
    write(tmp_path, **{"0001_initial.sql": "A", "README.md": "notes", "0002_next.sql.bak": "x"})
    assert [m.name for m in load_migrations(tmp_path)] == ["initial"]


@pytest.mark.parametrize(
    "name",
    [
        "1_initial.sql",
        "001_initial.sql",
        "00001_initial.sql",
        "0001-initial.sql",
        "0001_Initial.sql",
        "0001_add-index.sql",
        "0001_.sql",
        "initial.sql",
        "0001.sql",
        "v0001_initial.sql",
    ],
)
def test_badly_named_sql_files_are_refused_naming_the_file(tmp_path: Path, name: str) -> None:
    write(tmp_path, **{"0000_base.sql": "", name: "SELECT 1;"})
    with pytest.raises(MigrationError, match=r"NNNN_name\.sql") as caught:
        load_migrations(tmp_path)
    assert name in str(caught.value)


def test_duplicate_versions_are_refused(tmp_path: Path) -> None:
    write(tmp_path, **{"0001_initial.sql": "A", "0002_outbox.sql": "B", "0002_index.sql": "C"})
    with pytest.raises(MigrationError, match="duplicate"):
        load_migrations(tmp_path)


def test_the_checksum_is_the_sha256_of_the_text() -> None:
    migration = Migration(1, "initial", "CREATE TABLE t (id int);")
    assert migration.checksum == hashlib.sha256(b"CREATE TABLE t (id int);").hexdigest()


def test_editing_a_migration_changes_its_checksum() -> None:
    before = Migration(1, "initial", "CREATE TABLE t (id int);")
    after = Migration(1, "initial", "CREATE TABLE t (id bigint);")
    assert before.checksum != after.checksum


def test_the_file_text_is_read_verbatim(tmp_path: Path) -> None:
    text = "-- comment\nCREATE TABLE t (name text DEFAULT 'é');\n"
    write(tmp_path, **{"0001_initial.sql": text})
    [migration] = load_migrations(tmp_path)
    assert migration.sql == text


def test_the_registry_ships_valid_migrations() -> None:
    migrations = load_migrations(REGISTRY_MIGRATIONS)
    assert migrations
    assert migrations[0].version == 1
    assert [m.version for m in migrations] == sorted({m.version for m in migrations})
