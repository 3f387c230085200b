"""The secrets and key ring commands without a server: requests built, text
printed, and values never taken from argv nor printed back."""

from __future__ import annotations

import io
import json
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from eventflow.vault.v1 import audit_service_pb2 as au
from eventflow.vault.v1 import key_ring_service_pb2 as kr
from eventflow.vault.v1 import secret_service_pb2 as ss
from google.protobuf.timestamp_pb2 import Timestamp

from cli import main as cli_main
from cli.client import Client
from cli.profile import Settings
from libs.errors import EventflowError
from services.vault.keyring import read_keyring_file
from tests.fakes import RichRpcError

CANARY = "sk_live_CANARY_cli"
NOW = Timestamp(seconds=1_700_000_000)


class FakeStub:
    """Answers each method from ``replies``; records (method, request, timeout)."""

    def __init__(self, replies: dict[str, Any] | None = None) -> None:
        self.replies = replies or {}
        self.calls: list[tuple[str, Any, Any]] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def method(request: Any, metadata: Any = None, timeout: Any = None) -> Any:
            self.calls.append((name, request, timeout))
            reply = self.replies[name]
            if isinstance(reply, BaseException):
                raise reply
            return reply(request) if callable(reply) else reply

        return method

    def only(self, name: str) -> Any:
        [request] = [r for m, r, _ in self.calls if m == name]
        return request


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(argv: list[str], stub: FakeStub | None = None, stdin: io.StringIO | None = None) -> Result:
    stub = stub or FakeStub()

    @contextmanager
    def connect(settings: Settings) -> Iterator[Client]:
        yield Client(stub, stub, settings.api_key, secrets=stub, key_ring=stub, audit=stub)

    out, err = io.StringIO(), io.StringIO()
    code = cli_main.run(
        ["--api-key", "efk_x", *argv],
        connect=connect,
        env={},
        cwd=Path("/"),
        out=out,
        err=err,
        stdin=stdin or io.StringIO(""),
    )
    return Result(code, out.getvalue(), err.getvalue())


def stored(request: ss.SetSecretRequest) -> ss.SetSecretResponse:
    return ss.SetSecretResponse(
        secret=ss.Secret(
            organization_id="acme", action=request.action, key=request.key, version=4,
            create_time=NOW, update_time=NOW, updated_by="key1",
        )
    )  # fmt: skip


def test_set_reads_the_value_from_stdin_and_strips_one_newline() -> None:
    stub = FakeStub({"SetSecret": stored})
    result = run(["secrets", "set", "score-order", "API_TOKEN"], stub, io.StringIO(CANARY + "\n"))
    assert result.code == 0, result.err
    request = stub.only("SetSecret")
    assert (request.action, request.key, request.value) == ("score-order", "API_TOKEN", CANARY)
    assert result.out.strip() == "set API_TOKEN of action score-order: version 4"
    assert CANARY not in result.out + result.err


def test_set_reads_a_value_file_and_raw_keeps_the_newline(tmp_path: Path) -> None:
    path = tmp_path / "key.pem"
    path.write_text("-----BEGIN KEY-----\nabc\n-----END KEY-----\n")
    stub = FakeStub({"SetSecret": stored})
    assert (
        run(["secrets", "set", "a", "TLS_KEY", "--value-file", str(path), "--raw"], stub).code == 0
    )
    assert stub.only("SetSecret").value == path.read_text()


def test_json_output_of_set_has_no_value() -> None:
    stub = FakeStub({"SetSecret": stored})
    result = run(["secrets", "set", "a", "K", "-o", "json"], stub, io.StringIO(CANARY))
    assert json.loads(result.out)["version"] == 4
    assert CANARY not in result.out and "value" not in json.loads(result.out)


def test_a_value_cannot_be_given_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    stub = FakeStub({"SetSecret": stored})
    for argv in (
        ["secrets", "set", "a", "K", CANARY],
        ["secrets", "set", "a", "K", "--value", CANARY],
        ["secrets", "set", "a", "K", f"--value={CANARY}"],
        ["secrets", "set", "a", "K", "--val", CANARY],  # not an abbreviation of --value-file
    ):
        result = run(argv, stub, io.StringIO("from stdin"))
        printed = capsys.readouterr()  # argparse writes its errors to the real stderr
        shown = result.out + result.err + printed.out + printed.err
        assert result.code == 2 and stub.calls == [], argv
        assert CANARY not in shown
        if "--val" not in argv:
            assert "never taken from the command line" in shown


def test_an_empty_value_is_a_usage_error_without_a_call() -> None:
    stub = FakeStub()
    result = run(["secrets", "set", "a", "K"], stub, io.StringIO("\n"))
    assert result.code == 2 and stub.calls == []
    assert "no value given" in result.err


def test_an_unreadable_value_file_is_a_usage_error(tmp_path: Path) -> None:
    result = run(["secrets", "set", "a", "K", "--value-file", str(tmp_path / "nope")])
    assert result.code == 2 and "cannot read" in result.err


def test_on_a_terminal_the_value_is_prompted_without_echo(monkeypatch: pytest.MonkeyPatch) -> None:
    prompts: list[str] = []

    def fake_getpass(prompt: str) -> str:
        prompts.append(prompt)
        return CANARY

    monkeypatch.setattr("cli.secrets.getpass.getpass", fake_getpass)
    stub = FakeStub({"SetSecret": stored})
    result = run(["secrets", "set", "a", "K"], stub, FakeTerminal())
    assert result.code == 0 and stub.only("SetSecret").value == CANARY
    assert prompts == ["value of K (not echoed): "]


def test_server_errors_are_printed_with_reason_and_field() -> None:
    from libs.errors import invalid_field

    error = RichRpcError(invalid_field("key", "must be 1-64 characters").to_status())
    result = run(
        ["secrets", "set", "a", "bad-key"], FakeStub({"SetSecret": error}), io.StringIO("v")
    )
    assert result.code == 1
    assert "INVALID_ARGUMENT" in result.err and "key: must be 1-64" in result.err


def test_list_shows_keys_and_versions() -> None:
    reply = ss.ListSecretsResponse(
        secrets=[
            ss.Secret(action="score-order", key="RISK_THRESHOLD", version=2, create_time=NOW,
                      update_time=NOW, updated_by="key1"),
        ]
    )  # fmt: skip
    stub = FakeStub({"ListSecrets": reply})
    result = run(["secrets", "list", "score-order"], stub)
    assert stub.only("ListSecrets").action == "score-order"
    lines = result.out.splitlines()
    assert lines[0].split() == ["ACTION", "KEY", "VERSION", "CREATED", "UPDATED", "BY"]
    assert "RISK_THRESHOLD" in lines[1] and " 2 " in lines[1]
    assert run(["secrets", "list"], FakeStub({"ListSecrets": ss.ListSecretsResponse()})).out == (
        "No secrets.\n"
    )


def test_versions_delete_and_purge() -> None:
    stub = FakeStub(
        {
            "ListSecretVersions": ss.ListSecretVersionsResponse(
                versions=[
                    ss.SecretVersion(version=2, state=ss.SECRET_VERSION_STATE_CURRENT),
                    ss.SecretVersion(version=1, state=ss.SECRET_VERSION_STATE_DESTROYED),
                ]
            ),
            "DeleteSecret": ss.DeleteSecretResponse(destroyed_versions=2),
            "PurgeSecretVersions": ss.PurgeSecretVersionsResponse(
                destroyed_versions=1, current_version=2
            ),
        }
    )
    versions = run(["secrets", "versions", "a", "K"], stub).out
    assert "current" in versions and "destroyed" in versions
    assert "2 version(s) destroyed" in run(["secrets", "delete", "a", "K"], stub).out
    assert "version 2 is still served" in run(["secrets", "purge", "a", "K"], stub).out
    assert stub.only("DeleteSecret").key == "K"


def test_keyring_list_rewrap_and_retire() -> None:
    stub = FakeStub(
        {
            "ListKeyVersions": kr.ListKeyVersionsResponse(
                primary_version=2,
                key_versions=[
                    kr.KeyVersion(version=2, state=kr.KEY_VERSION_STATE_PRIMARY, usage_count=5,
                                  fingerprint="abcd"),
                    kr.KeyVersion(version=1, state=kr.KEY_VERSION_STATE_DECRYPT_ONLY,
                                  usage_count=3),
                ],
            ),
            "Rewrap": kr.RewrapResponse(primary_version=2, rewrapped=3, failed=0),
            "RetireKeyVersion": kr.RetireKeyVersionResponse(
                key_version=kr.KeyVersion(version=1, state=kr.KEY_VERSION_STATE_RETIRED)
            ),
        }
    )  # fmt: skip
    listing = run(["admin", "keyring", "list"], stub).out
    assert "primary" in listing and "decrypt-only" in listing and "abcd" in listing
    rewrap = run(["admin", "keyring", "rewrap"], stub)
    assert rewrap.code == 0 and "3 secret version(s) now wrapped by key version 2" in rewrap.out
    assert [t for m, _, t in stub.calls if m == "Rewrap"] == [600.0]
    retire = run(["admin", "keyring", "retire", "1"], stub)
    assert retire.code == 0 and stub.only("RetireKeyVersion").version == 1
    assert run(["admin", "keyring", "retire", "0"], stub).code == 2


def test_a_rewrap_with_failures_exits_non_zero() -> None:
    stub = FakeStub({"Rewrap": kr.RewrapResponse(primary_version=2, rewrapped=3, failed=1)})
    result = run(["admin", "keyring", "rewrap"], stub)
    assert result.code == 1 and "1 failed" in result.out and "audit" in result.err


def test_keyring_rotate_works_offline_and_never_prints_key_material(tmp_path: Path) -> None:
    path = tmp_path / "vault_keyring"
    stub = FakeStub()
    first = run(["admin", "keyring", "rotate", "--file", str(path)], stub)
    assert first.code == 0 and "added key version 1" in first.out
    second = run(["admin", "keyring", "rotate", "--file", str(path)], stub)
    assert second.code == 0, second.err
    ring = read_keyring_file(path)
    assert ring.versions == [1, 2] and stub.calls == []
    assert f"fingerprint {ring.primary.fingerprint}" in second.out
    assert "restart every vault replica" in second.out and "retire N" in second.out
    for key in (ring.get(1), ring.get(2)):
        assert key is not None and key.entry().split(":")[1] not in first.out + second.out
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    as_json = run(["admin", "keyring", "rotate", "--file", str(path), "-o", "json"], stub)
    assert json.loads(as_json.out)["version"] == 3


def test_keyring_rotate_refuses_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "ring"
    path.write_text("not a ring\n")
    result = run(["admin", "keyring", "rotate", "--file", str(path)])
    assert result.code == 2 and "entry 1" in result.err


def test_audit_filters_are_sent_and_events_shown() -> None:
    reply = au.ListAuditEventsResponse(
        events=[
            au.AuditEvent(id=7, create_time=NOW, organization_id="acme", action="score",
                          key="RISK", secret_version=2, operation=au.AUDIT_OPERATION_RESOLVE,
                          caller="service:executor", outcome=au.AUDIT_OUTCOME_OK,
                          detail="instance 1"),
        ]
    )  # fmt: skip
    stub = FakeStub({"ListAuditEvents": reply})
    result = run(["admin", "audit", "--action", "score", "--operation", "resolve"], stub)
    request = stub.only("ListAuditEvents")
    assert (request.action, request.operation) == ("score", au.AUDIT_OPERATION_RESOLVE)
    assert "service:executor" in result.out and "resolve" in result.out and "ok" in result.out


def test_operator_only_errors_reach_the_user() -> None:
    denied = EventflowError(
        grpc.StatusCode.PERMISSION_DENIED, "OPERATOR_ONLY", "only the platform operator"
    )
    result = run(
        ["admin", "keyring", "list"],
        FakeStub({"ListKeyVersions": RichRpcError(denied.to_status())}),
    )
    assert result.code == 1 and "OPERATOR_ONLY" in result.err
