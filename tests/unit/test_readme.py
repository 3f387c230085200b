"""The README's settings table is the one libs/config.py generates."""

from pathlib import Path

from libs.config import settings_table


def test_readme_settings_table_matches_the_code() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert settings_table() in readme, "README settings table is stale: paste settings_table()"


def test_readme_starts_with_the_two_commands() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    head = readme.split("```", 2)[1]
    assert "make run" in head and "make test" in head
