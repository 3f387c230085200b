"""``eventflow actions ...`` without a server.

Commands run end to end through ``cli.main.run`` against a fake
ActionService stub wrapped in the real ``Client``, so the requests built (the
upload stream included), the metadata sent and the text printed are exactly
what a user would get.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from eventflow.governance.v1 import action_pb2
from eventflow.governance.v1 import action_service_pb2 as pb
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from cli import main as cli_main
from cli.action_views import micros, size, version_detail
from cli.actions import CHUNK_BYTES, EXIT_RUN_FAILED
from cli.client import Client, open_client
from cli.profile import Settings
from libs.errors import EventflowError, FieldViolation, invalid_argument
from tests.cli.fakes import FakeStub, Result, TtyStringIO
from tests.fakes import RichRpcError

KEY = "efk_test_secret_value"
SHA = "ab" * 32
SECRET = "s3cr3t-Value"
T0 = Timestamp(seconds=1_700_000_000)


# --------------------------------------------------------------------- fakes


def run_cli(
    argv: list[str],
    stub: FakeStub | None = None,
    *,
    cwd: Path,
    stdin: str = "",
    err: io.StringIO | None = None,
) -> Result:
    stub = stub or FakeStub({})

    @contextmanager
    def connect(settings: Settings) -> Iterator[Client]:
        yield Client(FakeStub({}), FakeStub({}), settings.api_key, actions=stub)

    out, err = io.StringIO(), err or io.StringIO()
    code = cli_main.run(
        ["--api-key", KEY, *argv],
        connect=connect,
        env={},
        cwd=cwd,
        out=out,
        err=err,
        stdin=io.StringIO(stdin),
    )
    return Result(code, out.getvalue(), err.getvalue())


def rpc_error(error: EventflowError) -> RichRpcError:
    return RichRpcError(error.to_status())


def action(**fields: Any) -> action_pb2.Action:
    message = action_pb2.Action(
        id="7f1c0000-0000-4000-8000-000000000001",
        organization_id="acme",
        name="score",
        enabled=True,
        latest_version=3,
        current_version=2,
        create_time=T0,
        update_time=T0,
    )
    for key, value in fields.items():
        setattr(message, key, value)
    return message


def version(**fields: Any) -> action_pb2.ActionVersion:
    message = action_pb2.ActionVersion(
        action_id="7f1c0000-0000-4000-8000-000000000001",
        action_name="score",
        version=3,
        sha256=SHA,
        size_bytes=3 * 1024 * 1024 + 200 * 1024,
        permissions=["read_secret:API_TOKEN", "read_secret:SALT"],
        review_status="pending_review",
        uploaded_by="efk_dev",
        signature_status="unverified",
        create_time=T0,
    )
    for key, value in fields.items():
        if isinstance(value, list):
            del getattr(message, key)[:]
            getattr(message, key).extend(value)
        elif isinstance(value, Message):
            getattr(message, key).CopyFrom(value)
        else:
            setattr(message, key, value)
    return message


def created(**fields: Any) -> pb.UploadActionVersionResponse:
    return pb.UploadActionVersionResponse(
        outcome=pb.UPLOAD_OUTCOME_CREATED, action=action(), version=version(**fields)
    )


def simulated(**fields: Any) -> pb.SimulateActionResponse:
    result = pb.SimulationResult(
        ok=True,
        output_json='{"score": 7}',
        fuel_used=1_234_567,
        duration_us=2_500,
        peak_memory_bytes=2 * 1024 * 1024,
    )
    for key, value in fields.items():
        setattr(result, key, value)
    return pb.SimulateActionResponse(version=3, result=result)


@pytest.fixture
def wasm(tmp_path: Path) -> Path:
    path = tmp_path / "score.wasm"
    path.write_bytes(b"\0asm\1\0\0\0" + b"x" * 100)
    return path


# ------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    "argv",
    [
        ["actions"],
        ["actions", "bogus"],
        ["actions", "upload", "score"],
        ["actions", "get"],
        ["actions", "version", "score", "0"],
        ["actions", "review", "score", "1"],
        ["actions", "review", "score", "1", "--approve", "--reject"],
        ["actions", "review", "score", "one", "--approve"],
        ["actions", "simulate", "score"],
        ["actions", "simulate", "score", "--payload", "{}", "--version", "0"],
        ["actions", "list", "--page-size", "0"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], tmp_path: Path) -> None:
    stub = FakeStub({})
    assert run_cli(argv, stub, cwd=tmp_path).code == 2
    assert stub.calls == []


def test_simulate_help_documents_the_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["actions", "simulate", "--help"], cwd=tmp_path).code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "3 when the action ran and failed" in text
    assert "--secret-file K=PATH" in text


def test_actions_are_organization_wide_so_they_take_no_project_option(tmp_path: Path) -> None:
    assert run_cli(["actions", "list", "--project", "shop"], cwd=tmp_path).code == 2


# ------------------------------------------------------------------- upload


def test_upload_streams_the_header_then_the_module(tmp_path: Path, wasm: Path) -> None:
    signature = tmp_path / "sig.json"
    signature.write_text('{"alg": "ed25519", "public_key": "AA==", "signature": "BB=="}\n')
    stub = FakeStub({"UploadActionVersion": created()})
    argv = [
        "actions", "upload", "score", "--file", str(wasm),
        "--permissions", "read_secret:API_TOKEN, read_secret:SALT",
        "--signature", str(signature), "--description", "scores a lead",
    ]  # fmt: skip
    result = run_cli(argv, stub, cwd=tmp_path)
    assert result.code == 0
    [(_, messages, metadata, _)] = stub.calls
    assert dict(metadata) == {"authorization": f"Bearer {KEY}"}
    header = messages[0].header
    assert (header.name, header.description) == ("score", "scores a lead")
    # Sent exactly as given: the server parses and validates permissions.
    assert header.permissions == "read_secret:API_TOKEN, read_secret:SALT"
    assert header.signature == signature.read_text()
    assert [m.WhichOneof("part") for m in messages] == ["header", "chunk"]
    assert messages[1].chunk == wasm.read_bytes()
    assert result.out == (
        f"created version 3 (sha256 {SHA}, size 3.2 MiB, signature unverified, pending review)\n"
    )
    # A small module on a pipe: no progress line, only the review hint.
    assert result.err == (
        "hint: workflows run it once an admin approves it: "
        "eventflow actions review score 3 --approve\n"
    )


def test_a_large_module_goes_in_1_mib_chunks_with_a_progress_line(tmp_path: Path) -> None:
    module = bytes(range(256)) * (CHUNK_BYTES * 5 // 2 // 256)
    path = tmp_path / "big.wasm"
    path.write_bytes(module)
    stub = FakeStub({"UploadActionVersion": created()})
    result = run_cli(["actions", "upload", "big", "--file", str(path)], stub, cwd=tmp_path)
    assert result.code == 0
    [messages] = stub.requests("UploadActionVersion")
    chunks = [m.chunk for m in messages[1:]]
    assert [len(c) for c in chunks] == [CHUNK_BYTES, CHUNK_BYTES, CHUNK_BYTES // 2]
    assert b"".join(chunks) == module
    assert messages[0].header.permissions == ""
    assert result.err.splitlines()[0] == "uploading 2.5 MiB…"


def test_a_terminal_sees_the_percentage(tmp_path: Path, wasm: Path) -> None:
    err = TtyStringIO()
    stub = FakeStub({"UploadActionVersion": created()})
    result = run_cli(
        ["actions", "upload", "score", "--file", str(wasm)], stub, cwd=tmp_path, err=err
    )
    assert result.code == 0
    assert result.err.startswith("\ruploading 108 B…\ruploading 108 B… 100%\n")


def test_permissions_can_come_from_a_file(tmp_path: Path, wasm: Path) -> None:
    perms = tmp_path / "perms.json"
    perms.write_text('["read_secret:A"]')
    stub = FakeStub({"UploadActionVersion": created()})
    argv = ["actions", "upload", "score", "--file", str(wasm), "--permissions", f"@{perms}"]
    assert run_cli(argv, stub, cwd=tmp_path).code == 0
    assert stub.requests("UploadActionVersion")[0][0].header.permissions == '["read_secret:A"]'


def test_unchanged_upload_is_a_success(tmp_path: Path, wasm: Path) -> None:
    reply = pb.UploadActionVersionResponse(
        outcome=pb.UPLOAD_OUTCOME_UNCHANGED, version=version(version=2, review_status="approved")
    )
    stub = FakeStub({"UploadActionVersion": reply})
    result = run_cli(["actions", "upload", "score", "--file", str(wasm)], stub, cwd=tmp_path)
    assert (result.code, result.out, result.err) == (
        0,
        "UNCHANGED: same module and permissions as version 2\n",
        "",
    )


def test_upload_json_prints_the_response(tmp_path: Path, wasm: Path) -> None:
    stub = FakeStub({"UploadActionVersion": created(signature_status="verified")})
    argv = ["actions", "upload", "score", "--file", str(wasm), "-o", "json"]
    result = run_cli(argv, stub, cwd=tmp_path)
    printed = json.loads(result.out)
    assert printed["outcome"] == "UPLOAD_OUTCOME_CREATED"
    assert printed["version"]["signature_status"] == "verified"
    assert result.err == ""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--file", "{tmp}/nope.wasm"], "error: module file not found: {tmp}/nope.wasm\n"),
        (["--file", "{tmp}"], "error: cannot read module file {tmp}: Is a directory\n"),
        (
            ["--file", "{wasm}", "--signature", "{tmp}/sig.json"],
            "error: signature file not found: {tmp}/sig.json\n",
        ),
        (
            ["--file", "{wasm}", "--permissions", "@{tmp}/p.txt"],
            "error: --permissions file not found: {tmp}/p.txt\n",
        ),
    ],
)
def test_unreadable_local_files_exit_2_before_connecting(
    extra: list[str], message: str, tmp_path: Path, wasm: Path
) -> None:
    def fill(text: str) -> str:
        return text.format(tmp=tmp_path, wasm=wasm)

    stub = FakeStub({})
    result = run_cli(["actions", "upload", "score", *map(fill, extra)], stub, cwd=tmp_path)
    assert (result.code, result.err) == (2, fill(message))
    assert stub.calls == []


def test_upload_refused_by_the_server_exits_1(tmp_path: Path, wasm: Path) -> None:
    refused = rpc_error(
        invalid_argument([FieldViolation("permissions[0]", "unsupported permission 'x'")])
    )
    stub = FakeStub({"UploadActionVersion": refused})
    argv = ["actions", "upload", "score", "--file", str(wasm), "--permissions", "x"]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert result.code == 1
    assert "  permissions[0]: unsupported permission 'x'" in result.err


# ------------------------------------------------------------------ reading


def test_list_all_follows_every_page(tmp_path: Path) -> None:
    pages = [
        pb.ListActionsResponse(actions=[action(name="a")], next_page_token="t1"),
        pb.ListActionsResponse(actions=[action(name="b", enabled=False, current_version=0)]),
    ]
    stub = FakeStub({"ListActions": pages})
    result = run_cli(["actions", "list", "--all"], stub, cwd=tmp_path)
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0].split() == ["NAME", "ID", "ENABLED", "CURRENT", "LATEST", "UPDATED"]
    assert lines[1].split()[:5] == ["a", action().id, "yes", "2", "3"]
    assert lines[2].split()[:5] == ["b", action().id, "no", "-", "3"]
    assert lines[2].endswith("2023-11-14 22:13:20 UTC")
    requests = stub.requests("ListActions")
    assert [(r.page_token, r.page_size) for r in requests] == [("", 200), ("t1", 200)]


def test_list_page_hint_and_empty_list(tmp_path: Path) -> None:
    stub = FakeStub({"ListActions": pb.ListActionsResponse(next_page_token="tok")})
    result = run_cli(["actions", "list", "--page-size", "5"], stub, cwd=tmp_path)
    assert result.out == "No actions.\n"
    assert "--page-token tok" in result.err
    assert stub.requests("ListActions")[0].page_size == 5


def test_get_shows_the_action(tmp_path: Path) -> None:
    stub = FakeStub({"GetAction": pb.GetActionResponse(action=action(description="d"))})
    result = run_cli(["actions", "get", "score"], stub, cwd=tmp_path)
    assert result.code == 0
    assert stub.requests("GetAction")[0].action == "score"
    assert "Name:          score" in result.out
    assert "Enabled:       yes" in result.out
    assert "Current:       2" in result.out


def test_versions_table(tmp_path: Path) -> None:
    reply = pb.ListActionVersionsResponse(
        versions=[version(), version(version=2, permissions=[], review_status="approved")]
    )
    stub = FakeStub({"ListActionVersions": reply})
    result = run_cli(["actions", "versions", "score", "--page-size", "2"], stub, cwd=tmp_path)
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0].split() == [
        "VERSION", "SHA256", "SIZE", "REVIEW", "SIGNATURE", "PERMISSIONS", "UPLOADED", "BY",
        "CREATED",
    ]  # fmt: skip
    assert "3        abababababab  3.2 MiB  pending review  unverified" in lines[1]
    assert "read_secret:API_TOKEN, read_secret:SALT  efk_dev" in lines[1]
    assert "2        abababababab  3.2 MiB  approved        unverified  -" in lines[2]
    [request] = stub.requests("ListActionVersions")
    assert (request.action, request.page_size) == ("score", 2)


def test_version_detail_shows_the_review_history(tmp_path: Path) -> None:
    reviews = [
        action_pb2.ReviewEvent(
            from_status="pending_review", to_status="rejected", actor="efk_a", time=T0
        ),
        action_pb2.ReviewEvent(
            from_status="rejected", to_status="approved", comment="fixed", actor="efk_b", time=T0
        ),
    ]
    detail = version(
        review_status="approved",
        reviewed_by="efk_b",
        review_comment="fixed",
        review_time=T0,
        signature_status="verified",
        key_fingerprint="ed25519:" + "c" * 64,
        reviews=reviews,
    )
    stub = FakeStub({"GetActionVersion": pb.GetActionVersionResponse(version=detail)})
    result = run_cli(["actions", "version", "score", "3"], stub, cwd=tmp_path)
    assert result.code == 0
    assert stub.requests("GetActionVersion")[0].version == 3
    lines = result.out.splitlines()
    assert f"SHA-256:      {SHA}" in lines
    assert "Size:         3.2 MiB (3350528 bytes)" in lines
    assert f"Signature:    verified (ed25519:{'c' * 64})" in lines
    assert "Review:       approved" in lines
    history = lines[lines.index("Review history:") + 1 :]
    assert history[0].split() == ["TIME", "FROM", "TO", "BY", "COMMENT"]
    assert history[1].split()[3:] == ["pending", "review", "rejected", "efk_a", "-"]
    assert history[2].split()[3:] == ["rejected", "approved", "efk_b", "fixed"]
    assert version_detail(version()).endswith("Review history:\nNo reviews yet.")


def test_usages_table_and_empty(tmp_path: Path) -> None:
    usage = action_pb2.ActionUsage(
        workflow_id="wf-1",
        project_id="shop",
        workflow_name="Welcome",
        workflow_status="active",
        in_published=True,
    )
    stub = FakeStub(
        {
            "ListActionUsages": [
                pb.ListActionUsagesResponse(usages=[usage]),
                pb.ListActionUsagesResponse(),
            ]
        }
    )
    lines = run_cli(["actions", "usages", "score"], stub, cwd=tmp_path).out.splitlines()
    assert lines[0].split() == ["WORKFLOW", "PROJECT", "NAME", "STATUS", "IN", "DRAFT", "IN",
                                "PUBLISHED"]  # fmt: skip
    assert lines[1].split() == ["wf-1", "shop", "Welcome", "active", "no", "yes"]
    empty = run_cli(["actions", "usages", "score"], stub, cwd=tmp_path)
    assert (empty.code, empty.out) == (0, "No workflows use this action.\n")


# ----------------------------------------------------------------- changing


@pytest.mark.parametrize(
    ("flag", "decision"), [("--approve", "approved"), ("--reject", "rejected")]
)
def test_review_sends_the_decision(flag: str, decision: str, tmp_path: Path) -> None:
    reply = pb.ReviewActionVersionResponse(version=version(review_status=decision))
    stub = FakeStub({"ReviewActionVersion": reply})
    argv = ["actions", "review", "score", "3", flag, "--comment", "looks fine"]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert (result.code, result.out) == (0, f"version 3 of score is now {decision}\n")
    [request] = stub.requests("ReviewActionVersion")
    assert (request.action, request.version, request.decision, request.comment) == (
        "score",
        3,
        decision,
        "looks fine",
    )


def test_enable_disable_and_delete(tmp_path: Path) -> None:
    stub = FakeStub(
        {
            "DisableAction": pb.DisableActionResponse(action=action(enabled=False)),
            "EnableAction": pb.EnableActionResponse(action=action(enabled=True)),
            "DeleteAction": pb.DeleteActionResponse(),
        }
    )
    ref = action().id
    assert run_cli(["actions", "disable", ref], stub, cwd=tmp_path).out == (
        "action score is now disabled\n"
    )
    assert run_cli(["actions", "enable", "score"], stub, cwd=tmp_path).out == (
        "action score is now enabled\n"
    )
    assert run_cli(["actions", "delete", "score"], stub, cwd=tmp_path).out == (
        "deleted action score\n"
    )
    assert stub.requests("DisableAction")[0].action == ref
    assert run_cli(["actions", "delete", "score", "-o", "json"], stub, cwd=tmp_path).out == "{}\n"


def test_delete_in_use_exits_1_with_the_reason(tmp_path: Path) -> None:
    in_use = rpc_error(
        EventflowError(
            grpc.StatusCode.FAILED_PRECONDITION, "ACTION_IN_USE", "2 workflows use score"
        )
    )
    result = run_cli(
        ["actions", "delete", "score"], FakeStub({"DeleteAction": in_use}), cwd=tmp_path
    )
    assert (result.code, result.out) == (1, "")
    assert result.err == "error: ACTION_IN_USE: 2 workflows use score\n"


# --------------------------------------------------------------- simulation


def test_simulate_ok_prints_the_whole_report(tmp_path: Path) -> None:
    stub = FakeStub(
        {"SimulateAction": simulated(projection_json='{"tier": "gold"}', derived_event_json="")}
    )
    argv = ["actions", "simulate", "score", "--payload", '{"lead": 1}', "--version", "2"]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert result.code == 0
    assert result.out.splitlines() == [
        "Result:         ok",
        "Version:        3",
        'Output:         {"score": 7}',
        'Projection:     {"tier": "gold"}',
        "Derived event:  -",
        "Fuel used:      1,234,567",
        "Duration:       2.5 ms",
        "Peak memory:    2.0 MiB",
    ]
    [request] = stub.requests("SimulateAction")
    assert (request.action, request.version, request.payload_json) == ("score", 2, '{"lead": 1}')
    assert dict(request.secrets) == {}


def test_a_failed_run_exits_3_with_reason_and_message(tmp_path: Path) -> None:
    reply = simulated(
        ok=False, failure_reason="FUEL_EXHAUSTED", failure_message="ran out", output_json=""
    )
    stub = FakeStub({"SimulateAction": reply})
    result = run_cli(["actions", "simulate", "score", "--payload", "{}"], stub, cwd=tmp_path)
    assert result.code == EXIT_RUN_FAILED == 3
    assert result.out.splitlines()[:3] == [
        "Result:         failed",
        "Reason:         FUEL_EXHAUSTED",
        "Message:        ran out",
    ]
    assert stub.requests("SimulateAction")[0].version == 0
    as_json = run_cli(
        ["actions", "simulate", "score", "--payload", "{}", "-o", "json"],
        FakeStub({"SimulateAction": reply}),
        cwd=tmp_path,
    )
    assert as_json.code == 3
    assert json.loads(as_json.out)["result"]["failure_reason"] == "FUEL_EXHAUSTED"


def test_payload_from_a_file_or_stdin(tmp_path: Path) -> None:
    payload = tmp_path / "event.json"
    payload.write_text('{\n  "lead": "x"\n}\n')
    stub = FakeStub({"SimulateAction": simulated()})
    argv = ["actions", "simulate", "score", "--payload", f"@{payload}"]
    assert run_cli(argv, stub, cwd=tmp_path).code == 0
    argv = ["actions", "simulate", "score", "--payload", "@-"]
    assert run_cli(argv, stub, cwd=tmp_path, stdin='{"a": 2}').code == 0
    sent = [r.payload_json for r in stub.requests("SimulateAction")]
    assert sent == [payload.read_text(), '{"a": 2}']


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ('{"a": }', "error: --payload:1:7: invalid JSON: Expecting value\n"),
        ("[1, 2]", "error: --payload: the payload must be a JSON object, got list\n"),
        ("@{tmp}/none.json", "error: --payload file not found: {tmp}/none.json\n"),
        ("@{tmp}/bad.json", "error: {tmp}/bad.json:2:1: invalid JSON: Expecting value\n"),
    ],
)
def test_bad_payloads_exit_2_before_connecting(payload: str, message: str, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"a":\n}')
    stub = FakeStub({})
    argv = ["actions", "simulate", "score", "--payload", payload.replace("{tmp}", str(tmp_path))]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert (result.code, result.err) == (2, message.replace("{tmp}", str(tmp_path)))
    assert stub.calls == []


def test_secrets_are_sent_and_a_secret_file_loses_its_newline(tmp_path: Path) -> None:
    (tmp_path / "salt").write_text("pepper\n")
    stub = FakeStub({"SimulateAction": simulated()})
    argv = [
        "actions", "simulate", "score", "--payload", "{}",
        "--secret", f"API_TOKEN={SECRET}", "--secret", "EMPTY=", "--secret", "EQ=a=b",
        "--secret-file", f"SALT={tmp_path / 'salt'}",
    ]  # fmt: skip
    result = run_cli(argv, stub, cwd=tmp_path)
    assert result.code == 0
    assert dict(stub.requests("SimulateAction")[0].secrets) == {
        "API_TOKEN": SECRET,
        "EMPTY": "",
        "EQ": "a=b",
        "SALT": "pepper",
    }
    assert SECRET not in result.out + result.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--secret", SECRET], "--secret #1: expected NAME=VALUE"),
        (["--secret", "A=1", "--secret", f"bad name={SECRET}"], "--secret #2: expected NAME=VALUE"),
        (["--secret-file", SECRET], "--secret-file #1: expected NAME=PATH"),
        (["--secret", f"A={SECRET}", "--secret", f"A={SECRET}"], "secret A is given twice"),
        (["--secret-file", "A={tmp}/missing"], "--secret-file A: file not found: {tmp}/missing"),
        (["--secret-file", "A={tmp}/latin1"], "--secret-file A: file {tmp}/latin1 is not UTF-8"),
    ],
)
def test_bad_secrets_exit_2_without_echoing_values(
    args: list[str], message: str, tmp_path: Path
) -> None:
    (tmp_path / "latin1").write_bytes(b"\xff" + SECRET.encode())
    stub = FakeStub({})
    argv = ["actions", "simulate", "score", "--payload", "{}"]
    argv += [a.format(tmp=tmp_path) for a in args]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert result.code == 2
    assert result.err.startswith(f"error: {message.format(tmp=tmp_path)}")
    assert SECRET not in result.out + result.err
    assert stub.calls == []


def test_secret_values_in_the_result_are_redacted(tmp_path: Path) -> None:
    tricky = 'q"uo\\te'
    for mode in ("table", "json"):
        reply = simulated(
            ok=False,
            failure_reason="TRAP",
            failure_message=f"panicked: bad token {SECRET}",
            output_json=json.dumps({"echo": SECRET, "raw": tricky}),
        )
        stub = FakeStub({"SimulateAction": reply})
        argv = [
            "actions", "simulate", "score", "--payload", "{}", "-o", mode,
            "--secret", f"T={SECRET}", "--secret", f"Q={tricky}",
        ]  # fmt: skip
        result = run_cli(argv, stub, cwd=tmp_path)
        assert result.code == 3
        assert SECRET not in result.out + result.err
        assert "panicked: bad token ***" in result.out
        assert "***" in result.out and "uo" not in result.out
        assert result.err == "note: secret values in the result are shown as ***\n"


def test_secret_values_in_server_errors_are_redacted(tmp_path: Path) -> None:
    refused = rpc_error(
        invalid_argument([FieldViolation("secrets", f"value {SECRET} is too long")])
    )
    stub = FakeStub({"SimulateAction": refused})
    argv = ["actions", "simulate", "score", "--payload", "{}", "--secret", f"T={SECRET}"]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert result.code == 1
    assert result.err.splitlines() == [
        "error: INVALID_ARGUMENT: secrets: value *** is too long",
        "  secrets: value *** is too long",
    ]


# ------------------------------------------------------------ wiring, views


def test_the_real_client_has_an_action_stub(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = cli_main.run(
        ["--server", "127.0.0.1:1", "--api-key", KEY, "actions", "get", "score"],
        connect=open_client,
        env={},
        cwd=tmp_path,
        out=out,
        err=err,
    )
    assert code == 1
    assert err.getvalue().startswith("error: UNAVAILABLE: ")


@pytest.mark.parametrize(
    ("count", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (3 * 1024 * 1024 + 200 * 1024, "3.2 MiB")],
)
def test_sizes(count: int, text: str) -> None:
    assert size(count) == text


@pytest.mark.parametrize(
    ("us", "text"), [(850, "850 µs"), (12_345, "12.3 ms"), (1_500_000, "1.50 s")]
)
def test_run_durations(us: int, text: str) -> None:
    assert micros(us) == text
