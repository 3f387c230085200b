"""``eventflow sandbox reset`` without a server, against a fake SandboxService."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from eventflow.orchestrator.v1 import sandbox_service_pb2 as sb

from cli import main as cli_main
from cli.client import Client
from cli.profile import Settings
from libs.errors import failed_precondition
from tests.cli.fakes import FakeStub, Result, TtyStringIO
from tests.fakes import RichRpcError

KEY = "efk_test_secret_value"
COUNTS = sb.ResetSandboxResponse(
    events_deleted=12, instances_deleted=30, dead_letters_deleted=4, projections_deleted=0
)


def run_cli(argv: list[str], stub: FakeStub, *, cwd: Path, stdin: io.StringIO) -> Result:
    @contextmanager
    def connect(settings: Settings) -> Iterator[Client]:
        yield Client(FakeStub({}), FakeStub({}), settings.api_key, sandbox=stub)

    out, err = io.StringIO(), io.StringIO()
    code = cli_main.run(
        ["--api-key", KEY, *argv], connect=connect, env={}, cwd=cwd, out=out, err=err, stdin=stdin
    )
    return Result(code, out.getvalue(), err.getvalue())


def test_reset_with_yes_resets_the_named_project_and_prints_the_counts(tmp_path: Path) -> None:
    stub = FakeStub({"ResetSandbox": COUNTS})
    result = run_cli(
        ["sandbox", "reset", "--project", "shop", "--yes"],
        stub,
        cwd=tmp_path,
        stdin=io.StringIO(),
    )
    assert (result.code, result.err) == (0, "")
    [(method, request, metadata, timeout)] = stub.calls
    assert (method, request.project_id) == ("ResetSandbox", "shop")
    assert metadata == (("authorization", f"Bearer {KEY}"),) and timeout
    assert result.out.splitlines() == [
        "reset the sandbox of project shop; deleted:",
        "events:        12",
        "instances:     30",
        "dead letters:  4",
        "projections:   0",
    ]


def test_reset_as_json_prints_the_response(tmp_path: Path) -> None:
    stub = FakeStub({"ResetSandbox": COUNTS})
    result = run_cli(
        ["sandbox", "reset", "-y", "-o", "json"], stub, cwd=tmp_path, stdin=io.StringIO()
    )
    assert result.code == 0
    assert json.loads(result.out) == {
        "events_deleted": "12",
        "instances_deleted": "30",
        "dead_letters_deleted": "4",
    }
    # No --project: the server takes the key's own project.
    assert stub.requests("ResetSandbox")[0].project_id == ""


def test_a_terminal_is_asked_first_and_yes_resets(tmp_path: Path) -> None:
    stub = FakeStub({"ResetSandbox": COUNTS})
    result = run_cli(["sandbox", "reset"], stub, cwd=tmp_path, stdin=TtyStringIO("y\n"))
    assert result.code == 0
    assert "of the API key's project? Production is not touched. [y/N]" in result.err
    assert len(stub.calls) == 1 and "events:        12" in result.out


def test_declining_on_a_terminal_deletes_nothing(tmp_path: Path) -> None:
    for answer in ("\n", "n\n", "nope\n", ""):
        stub = FakeStub({"ResetSandbox": COUNTS})
        result = run_cli(
            ["sandbox", "reset", "--project", "shop"],
            stub,
            cwd=tmp_path,
            stdin=TtyStringIO(answer),
        )
        assert (result.code, result.out, stub.calls) == (1, "", [])
        assert result.err.endswith("cancelled: nothing was deleted\n")


def test_without_a_terminal_the_reset_needs_yes(tmp_path: Path) -> None:
    stub = FakeStub({"ResetSandbox": COUNTS})
    result = run_cli(["sandbox", "reset"], stub, cwd=tmp_path, stdin=io.StringIO("y\n"))
    assert (result.code, stub.calls) == (2, [])
    assert "pass --yes" in result.err


def test_a_starter_plan_refusal_is_reported_with_its_reason(tmp_path: Path) -> None:
    refusal = failed_precondition("SANDBOX_DISABLED", "the starter plan has no sandbox")
    stub = FakeStub({"ResetSandbox": RichRpcError(refusal.to_status())})
    result = run_cli(["sandbox", "reset", "--yes"], stub, cwd=tmp_path, stdin=io.StringIO())
    assert (result.code, result.out) == (1, "")
    assert result.err == "error: SANDBOX_DISABLED: the starter plan has no sandbox\n"
