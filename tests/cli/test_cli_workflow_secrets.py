"""``eventflow workflows create`` / ``rotate-secret``: the webhook signing secret is
printed once on stdout, with a warning on stderr that never repeats it."""

from __future__ import annotations

import json
from pathlib import Path

from eventflow.registry.v1 import workflow_service_pb2 as ws

from tests.cli.test_cli_unit import WORKFLOW_FILE, FakeStub, run_cli, stored

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def workflow_file(folder: Path) -> str:
    path = folder / "wf.json"
    path.write_text(json.dumps(WORKFLOW_FILE))
    return str(path)


def created_stub() -> FakeStub:
    return FakeStub(
        {
            "CreateWorkflow": ws.CreateWorkflowResponse(
                workflow=stored(name="Welcome email"), webhook_signing_secret=SECRET
            )
        }
    )


def test_create_prints_the_secret_once_on_stdout_and_warns_on_stderr(tmp_path: Path) -> None:
    result = run_cli(
        ["workflows", "create", "-f", workflow_file(tmp_path)], created_stub(), cwd=tmp_path
    )
    assert result.code == 0
    assert "Welcome email" in result.out
    assert result.out.count(SECRET) == 1
    assert result.out.rstrip().endswith(f"Webhook signing secret:  {SECRET}")
    assert "only time" in result.err and "rotate-secret wf-1" in result.err
    assert SECRET not in result.err


def test_create_as_json_keeps_the_workflow_fields_and_adds_the_secret(tmp_path: Path) -> None:
    argv = ["workflows", "create", "-f", workflow_file(tmp_path), "-o", "json"]
    result = run_cli(argv, created_stub(), cwd=tmp_path)
    printed = json.loads(result.out)
    assert (printed["id"], printed["status"]) == ("wf-1", "draft")
    assert printed["webhook_signing_secret"] == SECRET
    assert "only time" in result.err


def test_rotate_secret_sends_the_id_and_shows_the_new_secret(tmp_path: Path) -> None:
    reply = ws.RotateWebhookSigningSecretResponse(webhook_signing_secret=SECRET)
    stub = FakeStub({"RotateWebhookSigningSecret": reply})
    result = run_cli(["workflows", "rotate-secret", "wf-7"], stub, cwd=tmp_path)
    assert result.code == 0
    assert result.out == f"Webhook signing secret:  {SECRET}\n"
    assert "24 hours" in result.err and SECRET not in result.err
    assert stub.requests("RotateWebhookSigningSecret")[0].id == "wf-7"
    as_json = run_cli(["workflows", "rotate-secret", "wf-7", "-o", "json"], stub, cwd=tmp_path)
    assert json.loads(as_json.out) == {"webhook_signing_secret": SECRET}
