"""``eventflow workflows test`` without a server: requests built, text printed, exit codes."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from eventflow.orchestrator.v1 import instance_pb2
from eventflow.orchestrator.v1 import instance_service_pb2 as ins
from eventflow.orchestrator.v1 import test_run_service_pb2 as pb

from cli import main as cli_main
from cli import test_runs
from cli.client import Client
from cli.profile import Settings
from libs.errors import EventflowError, not_found
from tests.cli.fakes import FakeStub, Result
from tests.fakes import RichRpcError

KEY = "efk_test_secret_value"
WORKFLOW = "7d5c0000-0000-4000-8000-00000000000a"
EVENT = "test-4b7f0000-0000-4000-8000-000000000001"
INSTANCE = "9e1a0000-0000-4000-8000-000000000002"
METADATA = "http://169.254.169.254/latest"


def run_cli(argv: list[str], stub: FakeStub, *, cwd: Path, stdin: str = "") -> Result:
    """``stub`` answers for TestRunService and InstanceService."""

    @contextmanager
    def connect(settings: Settings) -> Iterator[Client]:
        yield Client(FakeStub({}), FakeStub({}), settings.api_key, instances=stub, test_runs=stub)

    out, err = io.StringIO(), io.StringIO()
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


def plan(**fields: Any) -> pb.DryRunWorkflowResponse:
    message = pb.DryRunWorkflowResponse(
        workflow_id=WORKFLOW,
        workflow_version=3,
        environment="production",
        trigger_event="order.created",
        reentry=pb.ReentryDecision(
            subject="u-1",
            mode="once",
            allowed=False,
            reason="once: the subject already has an instance of this workflow",
        ),
        steps=[
            pb.PlannedStep(
                index=0,
                name="score",
                type="custom_action",
                runnable=True,
                action="risk-scorer",
                action_id="a-1",
                action_version=2,
                max_attempts=3,
            ),
            pb.PlannedStep(
                index=1,
                name="notify",
                type="webhook",
                runnable=False,
                url=METADATA,
                problem_reason="WEBHOOK_REFUSED",
                problem="169.254.169.254: cloud metadata address",
                max_attempts=5,
            ),
            pb.PlannedStep(index=2, type="delay", runnable=True, duration_ms=90_000),
        ],
        would_run=False,
    )
    for key, value in fields.items():
        setattr(message, key, value)
    return message


def instance(status: str) -> ins.GetInstanceResponse:
    return ins.GetInstanceResponse(
        instance=instance_pb2.Instance(
            id=INSTANCE,
            workflow_id=WORKFLOW,
            event_id=EVENT,
            status=status,
            is_test=True,
            environment="production",
        )
    )


def started() -> pb.HotRunWorkflowResponse:
    return pb.HotRunWorkflowResponse(event_id=EVENT, instance_id=INSTANCE)


def test_a_dry_run_prints_the_decision_and_one_row_per_step(tmp_path: Path) -> None:
    stub = FakeStub({"DryRunWorkflow": plan()})
    argv = ["workflows", "test", WORKFLOW, "--payload", '{"userId": "u-1"}', "--dry-run"]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert (result.code, result.err) == (0, "")
    [request] = stub.requests("DryRunWorkflow")
    assert (request.workflow_id, request.draft, request.payload_json) == (
        WORKFLOW,
        False,
        '{"userId": "u-1"}',
    )
    lines = result.out.splitlines()
    assert lines[:5] == [
        f"Workflow:     {WORKFLOW} (version 3)",
        "Environment:  production",
        "Trigger:      order.created",
        "Re-entry:     once, subject u-1: blocked "
        "(once: the subject already has an instance of this workflow)",
        "Would run:    no",
    ]
    table = lines[6:]
    assert table[0].split() == ["#", "NAME", "TYPE", "RUNS", "ATTEMPTS", "WHAT", "PROBLEM"]
    assert table[1].split() == ["1", "score", "custom_action", "yes", "3", "risk-scorer", "v2", "-"]
    assert table[2].split()[:6] == ["2", "notify", "webhook", "no", "5", METADATA]
    assert table[2].endswith("WEBHOOK_REFUSED: 169.254.169.254: cloud metadata address")
    assert table[3].split() == ["3", "-", "delay", "yes", "-", "wait", "1m30s", "-"]


def test_a_draft_dry_run_as_json_is_the_response(tmp_path: Path) -> None:
    response = plan(workflow_version=0, would_run=True)
    stub = FakeStub({"DryRunWorkflow": response})
    argv = ["workflows", "test", WORKFLOW, "--payload", "{}", "--draft", "--dry-run", "-o", "json"]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert result.code == 0
    shown = json.loads(result.out)
    assert shown["would_run"] is True and "workflow_version" not in shown
    assert shown["steps"][0]["action_version"] == 2
    assert stub.requests("DryRunWorkflow")[0].draft


def test_a_hot_run_prints_the_test_event_and_instance(tmp_path: Path) -> None:
    stub = FakeStub({"HotRunWorkflow": started()})
    payload = tmp_path / "order.json"
    payload.write_text('{\n  "orderId": 17\n}\n')
    argv = ["workflows", "test", WORKFLOW, "--payload", f"@{payload}", "--hot-run"]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert (result.code, result.out) == (0, f"Event:     {EVENT}\nInstance:  {INSTANCE}\n")
    assert stub.requests("HotRunWorkflow")[0].payload_json == payload.read_text()
    assert stub.requests("GetInstance") == []


@pytest.mark.parametrize(("final", "code"), [("completed", 0), ("failed", 1)])
def test_wait_follows_the_instance_and_exits_with_its_outcome(
    final: str, code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(test_runs, "POLL_INTERVAL_S", 0)
    stub = FakeStub(
        {
            "HotRunWorkflow": started(),
            "GetInstance": [instance("running"), instance("running"), instance(final)],
        }
    )
    argv = ["workflows", "test", WORKFLOW, "--payload", "@-", "--hot-run", "--wait"]
    result = run_cli(argv, stub, cwd=tmp_path, stdin='{"orderId": 17}')
    assert result.code == code
    assert stub.requests("HotRunWorkflow")[0].payload_json == '{"orderId": 17}'
    assert [r.id for r in stub.requests("GetInstance")] == [INSTANCE] * 3
    assert result.out.startswith(f"Event:     {EVENT}\nInstance:  {INSTANCE}\n\n")
    assert f"Status:       {final} (test run)" in result.out


def test_wait_as_json_prints_the_final_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(test_runs, "POLL_INTERVAL_S", 0)
    stub = FakeStub({"HotRunWorkflow": started(), "GetInstance": instance("completed")})
    argv = ["workflows", "test", WORKFLOW, "--payload", "{}", "--hot-run", "--wait", "-o", "json"]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert result.code == 0
    shown = json.loads(result.out)
    assert (shown["id"], shown["event_id"], shown["is_test"]) == (INSTANCE, EVENT, True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--payload", "[1]", "--dry-run"],
            "error: --payload: the payload must be a JSON object, got array\n",
        ),
        (
            ["--payload", '{"a": }', "--dry-run"],
            "error: --payload:1:7: invalid JSON: Expecting value\n",
        ),
        (
            ["--payload", '{"a": NaN}', "--hot-run"],
            "error: --payload: invalid JSON: NaN is not a JSON value\n",
        ),
        (
            ["--payload", "@{tmp}/none.json", "--dry-run"],
            "error: --payload file not found: {tmp}/none.json\n",
        ),
        (
            ["--payload", "{}", "--dry-run", "--wait"],
            "error: --wait follows a hot run's instance; use it with --hot-run\n",
        ),
        (["--payload", "{}"], None),
        (["--payload", "{}", "--dry-run", "--hot-run"], None),
        (["--dry-run"], None),
    ],
)
def test_bad_input_exits_2_before_connecting(
    args: list[str], message: str | None, tmp_path: Path
) -> None:
    stub = FakeStub({})
    argv = ["workflows", "test", WORKFLOW, *[a.replace("{tmp}", str(tmp_path)) for a in args]]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert result.code == 2
    if message is not None:
        assert result.err == message.replace("{tmp}", str(tmp_path))
    assert stub.calls == []


def test_an_oversized_payload_is_refused_locally(tmp_path: Path) -> None:
    stub = FakeStub({})
    big = json.dumps({"blob": "x" * (1024 * 1024)})
    result = run_cli(
        ["workflows", "test", WORKFLOW, "--payload", big, "--hot-run"], stub, cwd=tmp_path
    )
    assert result.code == 2 and "over 1 MiB" in result.err
    assert stub.calls == []


def test_the_servers_refusal_is_printed_with_exit_1(tmp_path: Path) -> None:
    refusals: list[EventflowError] = [
        not_found("workflow", WORKFLOW),
        EventflowError(
            grpc.StatusCode.FAILED_PRECONDITION,
            "SANDBOX_DISABLED",
            "the starter plan has no sandbox",
        ),
    ]
    for refusal in refusals:
        stub = FakeStub({"HotRunWorkflow": RichRpcError(refusal.to_status())})
        argv = ["workflows", "test", WORKFLOW, "--payload", "{}", "--hot-run"]
        result = run_cli(argv, stub, cwd=tmp_path)
        assert (result.code, result.out) == (1, "")
        assert result.err.startswith(f"error: {refusal.reason}: {refusal.message}")
