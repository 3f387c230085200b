"""The protos pass `buf lint` (STANDARD) and `buf breaking` against the previous commit.

buf is the pinned CLI from clients/package.json; its config is protos/buf.yaml. The breaking
check reads the previous commit from this repository's own git history, so it needs a clone
with history: on a repository with a single commit, or a shallow clone, it fails and says so.
Two more tests feed buf a known violation of each kind, so a passing check means something.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.harness.clients import buf

ROOT = Path(__file__).resolve().parents[2]
PROTOS = ROOT / "protos"
PREVIOUS = "HEAD~1"


def run_buf(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(buf()), *(str(a) for a in args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def findings(result: subprocess.CompletedProcess[str]) -> list[tuple[str, str]]:
    """(file name, rule) of each finding buf printed as JSON lines."""
    found = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    return [(Path(f["path"]).name, f["type"]) for f in found]


def require_previous_commit() -> None:
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{PREVIOUS}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        pytest.fail(
            f"`buf breaking` compares against {PREVIOUS}, which this checkout does not have"
            " (a single commit or a shallow clone): clone with full history"
        )


@pytest.fixture
def protos_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "protos"
    shutil.copytree(PROTOS, copy)
    return copy


def test_protos_pass_buf_lint_standard() -> None:
    result = run_buf("lint", PROTOS)
    assert result.returncode == 0, f"buf lint:\n{result.stdout}{result.stderr}"


def test_protos_have_no_breaking_change_since_the_previous_commit() -> None:
    require_previous_commit()
    result = run_buf("breaking", PROTOS, "--against", f".git#ref={PREVIOUS},subdir=protos")
    assert result.returncode == 0, f"buf breaking vs {PREVIOUS}:\n{result.stdout}{result.stderr}"


def test_buf_lint_reports_a_field_not_in_lower_snake_case(protos_copy: Path) -> None:
    event = protos_copy / "eventflow" / "orchestrator" / "v1" / "event.proto"
    event.write_text(event.read_text().replace("string data_json = 8;", "string dataJson = 8;"))

    result = run_buf("lint", protos_copy, "--error-format=json")

    assert result.returncode != 0
    assert findings(result) == [("event.proto", "FIELD_LOWER_SNAKE_CASE")]


def test_buf_breaking_reports_a_changed_field_type(protos_copy: Path) -> None:
    event = protos_copy / "eventflow" / "orchestrator" / "v1" / "event.proto"
    event.write_text(event.read_text().replace("int32 depth = 14;", "string depth = 14;"))

    result = run_buf("breaking", protos_copy, "--against", PROTOS, "--error-format=json")

    assert result.returncode != 0
    assert findings(result) == [("event.proto", "FIELD_SAME_TYPE")]
