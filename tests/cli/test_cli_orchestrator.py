"""``eventflow events|instances|dlq ...`` without a server.

Commands run end to end through ``cli.main.run`` against fake EventService,
InstanceService and DeadLetterService stubs wrapped in the real ``Client``,
so the requests built, the metadata sent and the text printed are exactly
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
from eventflow.orchestrator.v1 import event_pb2, instance_pb2
from eventflow.orchestrator.v1 import event_service_pb2 as es
from eventflow.orchestrator.v1 import instance_service_pb2 as ins
from google.protobuf.timestamp_pb2 import Timestamp

from cli import main as cli_main
from cli.client import Client, open_client
from cli.events import BATCH_SIZE, MAX_REPORTED
from cli.orchestrator_views import DETAIL_WIDTH, compact_json, pretty_json
from cli.profile import Settings
from libs.errors import EventflowError, FieldViolation, invalid_argument, not_found
from tests.cli.fakes import FakeStub, Result, TtyStringIO
from tests.fakes import RichRpcError

KEY = "efk_test_secret_value"
T0 = Timestamp(seconds=1_700_000_000)
T1 = Timestamp(seconds=1_700_000_060)
EVENT_ID = "0b6c0000-0000-4000-8000-0000000000e1"
LONG_ERROR = (
    "webhook https://hooks.example.com/orders answered 422 Unprocessable Entity: "
    "the receiver rejected the body because field data.customer.address.postcode is missing"
)


# --------------------------------------------------------------------- fakes


def run_cli(
    argv: list[str],
    stub: FakeStub | None = None,
    *,
    cwd: Path,
    stdin: str = "",
    err: io.StringIO | None = None,
    env: dict[str, str] | None = None,
) -> Result:
    """Runs with ``stub`` answering for all three orchestrator services."""
    stub = stub or FakeStub({})

    @contextmanager
    def connect(settings: Settings) -> Iterator[Client]:
        yield Client(
            FakeStub({}),
            FakeStub({}),
            settings.api_key,
            events=stub,
            instances=stub,
            dead_letters=stub,
        )

    out, err = io.StringIO(), err or io.StringIO()
    code = cli_main.run(
        ["--api-key", KEY, *argv],
        connect=connect,
        env=env or {},
        cwd=cwd,
        out=out,
        err=err,
        stdin=io.StringIO(stdin),
    )
    return Result(code, out.getvalue(), err.getvalue())


def rpc_error(error: EventflowError) -> RichRpcError:
    return RichRpcError(error.to_status())


def event(**fields: Any) -> event_pb2.Event:
    message = event_pb2.Event(
        id=EVENT_ID,
        organization_id="acme",
        project_id="shop",
        environment="production",
        type="order.created",
        source="grpc",
        subject="order-17",
        data_json='{"orderId":17,"email":"ana@example.com","items":[{"sku":"A1"}]}',
        time=T0,
        receive_time=T1,
        correlation_id=EVENT_ID,
    )
    for key, value in fields.items():
        setattr(message, key, value)
    return message


def instance(**fields: Any) -> instance_pb2.Instance:
    message = instance_pb2.Instance(
        id="in-1",
        organization_id="acme",
        project_id="shop",
        environment="production",
        workflow_id="wf-welcome",
        workflow_version=3,
        event_id=EVENT_ID,
        subject="ana@example.com",
        status="running",
        current_step=1,
        attempt=2,
        create_time=T0,
        update_time=T1,
    )
    for key, value in fields.items():
        setattr(message, key, value)
    return message


def dead_letter(**fields: Any) -> instance_pb2.DeadLetter:
    message = instance_pb2.DeadLetter(
        id="dl-1",
        organization_id="acme",
        project_id="shop",
        environment="production",
        event_id=EVENT_ID,
        instance_id="in-1",
        workflow_id="wf-welcome",
        workflow_version=3,
        step=1,
        step_name="notify",
        attempts=5,
        reason="WEBHOOK_FAILED",
        error=LONG_ERROR,
        status="open",
        create_time=T0,
    )
    for key, value in fields.items():
        setattr(message, key, value)
    return message


def jsonl(*items: object) -> str:
    return "".join(json.dumps(item) + "\n" for item in items)


# ------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    "argv",
    [
        ["events"],
        ["events", "bogus"],
        ["events", "get"],
        ["events", "get", "e1", "--env", "staging"],
        ["events", "reactions"],
        ["events", "publish", "--type", "a", "--data", "{}", "--env", "prod"],
        ["instances"],
        ["instances", "list", "--status", "done"],
        ["instances", "list", "--page-size", "0"],
        ["instances", "get"],
        ["instances", "log"],
        ["dlq"],
        ["dlq", "list", "--status", "closed"],
        ["dlq", "show"],
        ["dlq", "redrive"],
        ["dlq", "discard"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], tmp_path: Path) -> None:
    stub = FakeStub({})
    assert run_cli(argv, stub, cwd=tmp_path).code == 2
    assert stub.calls == []


def test_help_lists_the_three_groups(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["--help"], cwd=tmp_path).code == 0
    text = capsys.readouterr().out
    for group in ("events", "instances", "dlq"):
        assert f"\n    {group} " in text


# ------------------------------------------------------------ publish: one


def test_publish_sends_the_event_and_prints_its_id(tmp_path: Path) -> None:
    stub = FakeStub({"Publish": es.PublishResponse(event_id=EVENT_ID)})
    argv = [
        "events", "publish", "--type", "order.created", "--data", '{"orderId": 17}',
        "--id", "e-17", "--subject", "order-17", "--env", "sandbox", "--source", "shop-api",
        "--project", "shop",
    ]  # fmt: skip
    result = run_cli(argv, stub, cwd=tmp_path)
    assert (result.code, result.out, result.err) == (0, f"{EVENT_ID}\n", "")
    [(_, request, metadata, timeout)] = stub.calls
    assert dict(metadata) == {"authorization": f"Bearer {KEY}"}
    assert timeout == 30.0
    sent = request.event
    assert (sent.id, sent.type, sent.subject, sent.environment, sent.source) == (
        "e-17",
        "order.created",
        "order-17",
        "sandbox",
        "shop-api",
    )
    assert (sent.project_id, sent.data_json) == ("shop", '{"orderId": 17}')


def test_publish_leaves_defaults_to_the_server(tmp_path: Path) -> None:
    stub = FakeStub({"Publish": es.PublishResponse(event_id=EVENT_ID)})
    argv = ["events", "publish", "--type", "user.signed_up", "--data", "{}"]
    assert run_cli(argv, stub, cwd=tmp_path).code == 0
    sent = stub.requests("Publish")[0].event
    assert (sent.id, sent.source, sent.project_id, sent.environment, sent.subject) == (
        "",
        "",
        "",
        "",
        "",
    )


def test_publish_takes_the_project_from_the_environment(tmp_path: Path) -> None:
    stub = FakeStub({"Publish": es.PublishResponse(event_id=EVENT_ID)})
    argv = ["events", "publish", "--type", "a", "--data", "{}"]
    assert run_cli(argv, stub, cwd=tmp_path, env={"EVENTFLOW_PROJECT": "p9"}).code == 0
    assert stub.requests("Publish")[0].event.project_id == "p9"


def test_publish_json_prints_the_response(tmp_path: Path) -> None:
    stub = FakeStub({"Publish": es.PublishResponse(event_id=EVENT_ID)})
    argv = ["events", "publish", "--type", "a", "--data", "{}", "-o", "json"]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert json.loads(result.out) == {"event_id": EVENT_ID}


def test_data_comes_verbatim_from_a_file_or_stdin(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    path.write_text('{\n  "orderId": 17\n}\n')
    stub = FakeStub({"Publish": es.PublishResponse(event_id=EVENT_ID)})
    assert (
        run_cli(["events", "publish", "--type", "a", "--data", f"@{path}"], stub, cwd=tmp_path).code
        == 0
    )
    assert (
        run_cli(
            ["events", "publish", "--type", "a", "--data", "@-"],
            stub,
            cwd=tmp_path,
            stdin='{"b":1}',
        ).code
        == 0
    )
    sent = [r.event.data_json for r in stub.requests("Publish")]
    assert sent == [path.read_text(), '{"b":1}']


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data", '{"a": }'], "error: --data:1:7: invalid JSON: Expecting value\n"),
        (["--data", "[1, 2]"], "error: --data: the data must be a JSON object, got array\n"),
        (["--data", '"text"'], "error: --data: the data must be a JSON object, got string\n"),
        (["--data", '{"a": NaN}'], "error: --data: invalid JSON: NaN is not a JSON value\n"),
        (["--data", "@{tmp}/none.json"], "error: --data file not found: {tmp}/none.json\n"),
        (
            ["--data", "@{tmp}/bad.json"],
            "error: {tmp}/bad.json:2:1: invalid JSON: Expecting value\n",
        ),
        (
            ["--data", "{}", "--type", "Order Created"],
            "error: --type 'Order Created': must be 1-120 characters of lowercase letters, "
            "digits, '_', '-' or '.'\n",
        ),
        (["--type", "a"], "error: give --type and --data, or --file with one event per line\n"),
        (["--data", "{}", "--type", ""], None),
    ],
)
def test_bad_input_exits_2_before_connecting(
    args: list[str], message: str | None, tmp_path: Path
) -> None:
    (tmp_path / "bad.json").write_text('{"a":\n}')
    argv = ["events", "publish", *[a.replace("{tmp}", str(tmp_path)) for a in args]]
    if "--type" not in args:
        argv += ["--type", "order.created"]
    stub = FakeStub({})
    result = run_cli(argv, stub, cwd=tmp_path)
    assert result.code == 2
    if message is not None:
        assert result.err == message.replace("{tmp}", str(tmp_path))
    assert stub.calls == []


def test_data_over_1_mib_is_refused_locally(tmp_path: Path) -> None:
    big = json.dumps({"blob": "x" * (1024 * 1024)})
    stub = FakeStub({})
    result = run_cli(["events", "publish", "--type", "a", "--data", big], stub, cwd=tmp_path)
    assert result.code == 2
    assert "at most 1 MiB" in result.err
    assert stub.calls == []


def test_publish_refused_by_the_server_exits_1(tmp_path: Path) -> None:
    refused = rpc_error(
        EventflowError(grpc.StatusCode.FAILED_PRECONDITION, "SANDBOX_DISABLED", "plan starter")
    )
    stub = FakeStub({"Publish": refused})
    argv = ["events", "publish", "--type", "a", "--data", "{}", "--env", "sandbox"]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert (result.code, result.out) == (1, "")
    assert result.err == "error: SANDBOX_DISABLED: plan starter\n"


# ---------------------------------------------------------- publish: batch


def ids_for(request: es.PublishBatchRequest) -> es.PublishBatchResponse:
    return es.PublishBatchResponse(event_ids=[f"id-{e.data_json}" for e in request.events])


def numbered(count: int) -> str:
    return jsonl(*({"type": "tick", "data": {"n": n}} for n in range(count)))


def test_a_batch_goes_in_calls_of_500_with_progress(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(numbered(1200))
    stub = FakeStub({"PublishBatch": ids_for})
    argv = ["events", "publish", "--file", str(path), "--project", "shop", "--source", "etl"]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert result.code == 0
    requests = stub.requests("PublishBatch")
    assert [len(r.events) for r in requests] == [BATCH_SIZE, BATCH_SIZE, 200] == [500, 500, 200]
    sent = [e for r in requests for e in r.events]
    assert [e.data_json for e in sent[:2]] == ['{"n":0}', '{"n":1}']
    assert {(e.project_id, e.source, e.environment) for e in sent} == {("shop", "etl", "")}
    assert result.err.splitlines() == [
        "published 500/1200…",
        "published 1000/1200…",
        "published 1200/1200…",
    ]
    assert result.out.splitlines() == [f'id-{{"n":{n}}}' for n in range(1200)]


def test_a_terminal_sees_the_progress_rewritten_in_place(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(numbered(600))
    err = TtyStringIO()
    stub = FakeStub({"PublishBatch": ids_for})
    result = run_cli(["events", "publish", "--file", str(path)], stub, cwd=tmp_path, err=err)
    assert result.code == 0
    assert result.err == "\rpublished 500/600…\rpublished 600/600…\n"


def test_a_small_batch_has_no_progress_line(tmp_path: Path) -> None:
    lines = jsonl(
        {"id": "e1", "type": "order.created", "data": {"orderId": 1}, "subject": "s1"},
        {"type": "order.created", "data": {"name": "Zoë\u2028"}, "env": "sandbox"},
    )
    stub = FakeStub({"PublishBatch": es.PublishBatchResponse(event_ids=["e1", "gen-2"])})
    argv = ["events", "publish", "--file", "-", "--env", "production"]
    result = run_cli(argv, stub, cwd=tmp_path, stdin="\n" + lines + "\n\n")
    assert (result.code, result.out, result.err) == (0, "e1\ngen-2\n", "")
    [request] = stub.requests("PublishBatch")
    first, second = request.events
    assert (first.id, first.subject, first.environment) == ("e1", "s1", "production")
    assert (second.id, second.environment) == ("", "sandbox")
    # U+2028 inside a JSON string is not a line break of the file.
    assert json.loads(second.data_json) == {"name": "Zoë\u2028"}


def test_batch_json_prints_one_response_with_every_id(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(numbered(501))
    stub = FakeStub({"PublishBatch": ids_for})
    result = run_cli(["events", "publish", "--file", str(path), "-o", "json"], stub, cwd=tmp_path)
    assert result.code == 0
    assert len(json.loads(result.out)["event_ids"]) == 501


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"type": "a", "data": {}', ":3:25: invalid JSON: Expecting ',' delimiter"),
        ('["a"]', ":3: expected a JSON object, got array"),
        ('{"data": {}}', ':3: "type" is required'),
        ('{"type": null, "data": {}}', ':3: "type" is required'),
        ('{"type": 7, "data": {}}', ':3: "type" must be a string, got number'),
        ('{"type": "Order", "data": {}}', ":3: \"type\" 'Order' must be 1-120 characters"),
        ('{"type": "a"}', ':3: "data" is required'),
        ('{"type": "a", "data": "{}"}', ':3: "data" must be a JSON object, got string'),
        ('{"type": "a", "data": {"x": 1e400}}', ':3: "data" holds a number too large for JSON'),
        ('{"type": "a", "data": {}, "subjet": "s"}', ":3: unknown key 'subjet': did you mean"),
        ('{"type": "a", "data": {}, "time": "now"}', ":3: unknown key 'time': keys are id, type"),
        ('{"type": "a", "data": {}, "env": "prod"}', ':3: "env" must be one of production, sand'),
        ('{"type": "a", "data": {}, "id": 5}', ':3: "id" must be a string, got number'),
    ],
)
def test_a_bad_line_is_named_before_anything_is_sent(
    line: str, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(numbered(1) + "\n" + line + "\n" + numbered(700))
    stub = FakeStub({})
    result = run_cli(["events", "publish", "--file", str(path)], stub, cwd=tmp_path)
    assert result.code == 2
    assert result.err.startswith(f"error: {path}{message}")
    assert result.err.endswith("; nothing was sent\n")
    assert stub.calls == []


def test_many_bad_lines_are_listed_up_to_a_limit(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(numbered(2) + "not json\n" * 12 + '{"type": "a"}\n')
    result = run_cli(["events", "publish", "--file", str(path)], cwd=tmp_path)
    assert result.code == 2
    lines = result.err.splitlines()
    assert lines[0] == f"error: {path}: 13 bad lines; nothing was sent"
    assert lines[1] == "  line 3, column 1: invalid JSON: Expecting value"
    assert len(lines) == 1 + MAX_REPORTED + 1
    assert lines[-1] == "  ... and 3 more"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("\n\n", "error: {path}: no events (expected one JSON object per line)\n"),
        (None, "error: events file not found: {path}\n"),
    ],
)
def test_an_empty_or_missing_batch_file_exits_2(
    content: str | None, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "events.jsonl"
    if content is not None:
        path.write_text(content)
    result = run_cli(["events", "publish", "--file", str(path)], cwd=tmp_path)
    assert (result.code, result.err) == (2, message.format(path=path))


def test_a_batch_file_brings_its_own_types_and_data(tmp_path: Path) -> None:
    argv = ["events", "publish", "--file", "x.jsonl", "--type", "a", "--subject", "s"]
    result = run_cli(argv, cwd=tmp_path)
    assert result.code == 2
    assert result.err == (
        "error: --type, --subject cannot be used with --file: each line gives its own\n"
    )


def test_a_failed_call_names_the_lines_and_what_was_published(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    # A blank line shifts every later event one line down.
    path.write_text(numbered(500) + "\n" + numbered(1100))
    refused = rpc_error(invalid_argument([FieldViolation("events[3].type", "reserved type")]))
    ok = es.PublishBatchResponse(event_ids=[f"id-{n}" for n in range(500)])
    stub = FakeStub({"PublishBatch": [ok, refused]})
    result = run_cli(["events", "publish", "--file", str(path)], stub, cwd=tmp_path)
    assert result.code == 1
    assert len(stub.requests("PublishBatch")) == 2
    assert result.err.splitlines() == [
        "published 500/1600…",
        "error: INVALID_ARGUMENT: events[3].type: reserved type",
        "  events[3].type: reserved type",
        f"  events[3] is {path} line 505",
        "published 500 of 1600 events (up to line 500); the call for lines 502-1001 failed; "
        "later lines were not sent",
    ]
    # What did go out is still reported.
    assert result.out.splitlines() == [f"id-{n}" for n in range(500)]


def test_a_failed_first_call_reports_nothing_published(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(numbered(3))
    down = rpc_error(EventflowError(grpc.StatusCode.UNAVAILABLE, "", "connection refused"))
    stub = FakeStub({"PublishBatch": down})
    result = run_cli(["events", "publish", "--file", str(path)], stub, cwd=tmp_path)
    assert (result.code, result.out) == (1, "")
    assert result.err.splitlines()[-1] == ("published 0 of 3 events; the call for lines 1-3 failed")


# ------------------------------------------------------------- events: read


def test_get_shows_the_event_and_its_pretty_data(tmp_path: Path) -> None:
    stub = FakeStub({"GetEvent": es.GetEventResponse(event=event())})
    argv = ["events", "get", EVENT_ID, "--env", "sandbox", "--project", "shop"]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert result.code == 0
    [request] = stub.requests("GetEvent")
    assert (request.id, request.project_id, request.environment) == (EVENT_ID, "shop", "sandbox")
    text = result.out
    assert f"ID:           {EVENT_ID}\n" in text
    assert "Type:         order.created\n" in text
    assert "Project:      acme/shop\n" in text
    assert "Time:         2023-11-14 22:13:20 UTC\n" in text
    assert "Received:     2023-11-14 22:14:20 UTC\n" in text
    assert "Replay:       -\n" in text
    assert text.endswith(
        "\n\nData:\n"
        + json.dumps(
            {"orderId": 17, "email": "ana@example.com", "items": [{"sku": "A1"}]}, indent=2
        )
        + "\n"
    )


def test_get_json_prints_the_event(tmp_path: Path) -> None:
    reply = es.GetEventResponse(event=event(replay_skip_side_effects=True, depth=2))
    stub = FakeStub({"GetEvent": reply})
    result = run_cli(["events", "get", EVENT_ID, "-o", "json"], stub, cwd=tmp_path)
    printed = json.loads(result.out)
    assert (printed["id"], printed["depth"], printed["replay_skip_side_effects"]) == (
        EVENT_ID,
        2,
        True,
    )
    assert stub.requests("GetEvent")[0].environment == ""


def test_get_unknown_event_exits_1(tmp_path: Path) -> None:
    stub = FakeStub({"GetEvent": rpc_error(not_found("event", "nope"))})
    result = run_cli(["events", "get", "nope"], stub, cwd=tmp_path)
    assert (result.code, result.err) == (1, "error: NOT_FOUND: event 'nope' not found\n")


def test_reactions_show_one_block_per_workflow_with_full_errors(tmp_path: Path) -> None:
    failed = event_pb2.Reaction(
        workflow_id="wf-welcome",
        workflow_version=3,
        instance_id="in-1",
        instance_status="failed",
        steps=[
            event_pb2.StepOutcome(
                index=0, name="score", type="custom_action", status="completed", attempts=1
            ),
            event_pb2.StepOutcome(
                index=1,
                name="notify",
                type="webhook",
                status="failed",
                attempts=5,
                error=LONG_ERROR,
            ),
            event_pb2.StepOutcome(index=2, name="wait", type="delay", status="pending"),
        ],
    )
    test_run = event_pb2.Reaction(
        workflow_id="wf-audit", workflow_version=1, instance_id="in-2",
        instance_status="running", is_test=True,
    )  # fmt: skip
    reply = es.ListEventReactionsResponse(reactions=[failed, test_run])
    stub = FakeStub({"ListEventReactions": reply})
    result = run_cli(["events", "reactions", EVENT_ID, "--env", "sandbox"], stub, cwd=tmp_path)
    assert result.code == 0
    [request] = stub.requests("ListEventReactions")
    assert (request.event_id, request.environment) == (EVENT_ID, "sandbox")
    first, second = result.out.rstrip("\n").split("\n\n")
    lines = first.splitlines()
    assert lines[:4] == [
        "Workflow:  wf-welcome@3",
        "Instance:  in-1",
        "Status:    failed",
        "Steps:",
    ]
    assert lines[4].split() == ["#", "NAME", "TYPE", "STATUS", "ATTEMPTS", "ERROR"]
    assert lines[5].split() == ["1", "score", "custom_action", "completed", "1", "-"]
    assert lines[6].split()[:5] == ["2", "notify", "webhook", "failed", "5"]
    assert lines[6].endswith(LONG_ERROR)
    assert lines[7].split() == ["3", "wait", "delay", "pending", "-", "-"]
    assert second.splitlines() == [
        "Workflow:  wf-audit@1",
        "Instance:  in-2",
        "Status:    running (test run)",
        "Steps:",
        "  No steps ran.",
    ]


def test_no_reactions_and_json(tmp_path: Path) -> None:
    stub = FakeStub(
        {
            "ListEventReactions": [
                es.ListEventReactionsResponse(),
                es.ListEventReactionsResponse(
                    reactions=[event_pb2.Reaction(workflow_id="wf", instance_id="in-1")]
                ),
            ]
        }
    )
    empty = run_cli(["events", "reactions", EVENT_ID], stub, cwd=tmp_path)
    assert (empty.code, empty.out) == (0, "No workflow reacted to this event.\n")
    as_json = run_cli(["events", "reactions", EVENT_ID, "-o", "json"], stub, cwd=tmp_path)
    assert json.loads(as_json.out) == {"reactions": [{"workflow_id": "wf", "instance_id": "in-1"}]}


# ---------------------------------------------------------------- instances


def test_instances_list_all_follows_every_page(tmp_path: Path) -> None:
    pages = [
        ins.ListInstancesResponse(instances=[instance()], next_page_token="t1"),
        ins.ListInstancesResponse(
            instances=[instance(id="in-2", status="completed", current_step=3, subject="")]
        ),
    ]
    stub = FakeStub({"ListInstances": pages})
    argv = ["instances", "list", "--all", "--workflow", "wf-welcome", "--status", "running"]
    result = run_cli(argv, stub, cwd=tmp_path, env={"EVENTFLOW_PROJECT": "shop"})
    assert (result.code, result.err) == (0, "")
    lines = result.out.splitlines()
    assert lines[0].split() == [
        "ID", "WORKFLOW", "VERSION", "EVENT", "SUBJECT", "STATUS", "STEP", "UPDATED",
    ]  # fmt: skip
    assert lines[1].split() == [
        "in-1", "wf-welcome", "3", EVENT_ID, "ana@example.com", "running", "2",
        "2023-11-14", "22:14:20", "UTC",
    ]  # fmt: skip
    assert lines[2].split()[:7] == ["in-2", "wf-welcome", "3", EVENT_ID, "-", "completed", "-"]
    requests = stub.requests("ListInstances")
    assert [(r.page_token, r.page_size) for r in requests] == [("", 200), ("t1", 200)]
    assert {(r.project_id, r.workflow_id, r.status) for r in requests} == {
        ("shop", "wf-welcome", "running")
    }


def test_instances_list_page_hint_empty_and_json(tmp_path: Path) -> None:
    reply = ins.ListInstancesResponse(next_page_token="tok")
    stub = FakeStub({"ListInstances": reply})
    result = run_cli(["instances", "list", "--page-size", "5"], stub, cwd=tmp_path)
    assert result.out == "No instances.\n"
    assert result.err == "more results: rerun with --all or --page-token tok\n"
    [request] = stub.requests("ListInstances")
    assert (request.page_size, request.status, request.workflow_id) == (5, "", "")
    as_json = run_cli(["instances", "list", "-o", "json"], stub, cwd=tmp_path)
    assert (json.loads(as_json.out), as_json.err) == ({"next_page_token": "tok"}, "")


def test_instances_get_shows_every_field(tmp_path: Path) -> None:
    reply = ins.GetInstanceResponse(instance=instance(status="paused", is_test=True))
    stub = FakeStub({"GetInstance": reply})
    result = run_cli(["instances", "get", "in-1"], stub, cwd=tmp_path)
    assert result.code == 0
    assert stub.requests("GetInstance")[0].id == "in-1"
    assert result.out.splitlines() == [
        "ID:           in-1",
        "Workflow:     wf-welcome@3",
        "Project:      acme/shop",
        "Environment:  production",
        f"Event:        {EVENT_ID}",
        "Subject:      ana@example.com",
        "Status:       paused (test run)",
        "Step:         2",
        "Attempt:      2",
        "Created:      2023-11-14 22:13:20 UTC",
        "Updated:      2023-11-14 22:14:20 UTC",
    ]
    as_json = run_cli(["instances", "get", "in-1", "-o", "json"], stub, cwd=tmp_path)
    assert json.loads(as_json.out)["current_step"] == 1


def log_entries() -> list[instance_pb2.InstanceLogEntry]:
    output = {"score": 7, "notes": "n" * 200}
    return [
        instance_pb2.InstanceLogEntry(position=1, kind="instance_created", time=T0),
        instance_pb2.InstanceLogEntry(
            position=2, kind="step_started", step=0, attempt=1, detail_json="{}", time=T0
        ),
        instance_pb2.InstanceLogEntry(
            position=3,
            kind="step_completed",
            step=0,
            attempt=1,
            detail_json=json.dumps({"output": output}, indent=2),
            time=T1,
        ),
        instance_pb2.InstanceLogEntry(
            position=4,
            kind="step_retrying",
            step=1,
            attempt=1,
            detail_json='{"error": "timeout", "next_attempt": "2023-11-14T22:15:00Z"}',
            time=T1,
        ),
    ]


def test_instances_log_compacts_and_cuts_details(tmp_path: Path) -> None:
    reply = ins.ListInstanceLogResponse(entries=log_entries())
    stub = FakeStub({"ListInstanceLog": reply})
    result = run_cli(["instances", "log", "in-1"], stub, cwd=tmp_path)
    assert result.code == 0
    assert stub.requests("ListInstanceLog")[0].instance_id == "in-1"
    lines = result.out.splitlines()
    assert lines[0].split() == ["POS", "TIME", "KIND", "STEP", "ATTEMPT", "DETAIL"]
    assert lines[1].split() == ["1", "2023-11-14", "22:13:20", "UTC", "instance_created", "-",
                                "-", "-"]  # fmt: skip
    assert lines[2].split()[4:] == ["step_started", "1", "1", "{}"]
    detail = lines[3].split(None, 7)[7]
    assert detail.startswith('{"output":{"score":7,"notes":"nnn')
    assert len(detail) == DETAIL_WIDTH and detail.endswith("…")
    assert lines[4].endswith('{"error":"timeout","next_attempt":"2023-11-14T22:15:00Z"}')
    assert lines[4].split()[4:7] == ["step_retrying", "2", "1"]
    assert result.err == "note: long details are cut short; --output json shows them whole\n"


def test_instances_log_json_keeps_details_whole(tmp_path: Path) -> None:
    stub = FakeStub({"ListInstanceLog": ins.ListInstanceLogResponse(entries=log_entries())})
    result = run_cli(["instances", "log", "in-1", "-o", "json"], stub, cwd=tmp_path)
    entries = json.loads(result.out)["entries"]
    assert json.loads(entries[2]["detail_json"])["output"]["notes"] == "n" * 200
    assert result.err == ""


def test_an_empty_log(tmp_path: Path) -> None:
    stub = FakeStub({"ListInstanceLog": ins.ListInstanceLogResponse()})
    result = run_cli(["instances", "log", "in-1"], stub, cwd=tmp_path)
    assert (result.code, result.out, result.err) == (0, "No log entries.\n", "")


# --------------------------------------------------------------------- dlq


def test_dlq_list_table_and_filters(tmp_path: Path) -> None:
    pages = [
        ins.ListDeadLettersResponse(dead_letters=[dead_letter()], next_page_token="t1"),
        ins.ListDeadLettersResponse(
            dead_letters=[dead_letter(id="dl-2", step=0, step_name="", status="redriven")]
        ),
    ]
    stub = FakeStub({"ListDeadLetters": pages})
    argv = [
        "dlq", "list", "--all", "--workflow", "wf-welcome", "--reason", "WEBHOOK_FAILED",
        "--status", "all", "--project", "shop",
    ]  # fmt: skip
    result = run_cli(argv, stub, cwd=tmp_path)
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0].split() == ["ID", "WORKFLOW", "STEP", "ATTEMPTS", "REASON", "STATUS", "CREATED"]
    assert lines[1].split() == [
        "dl-1", "wf-welcome@3", "#2", "notify", "5", "WEBHOOK_FAILED", "open",
        "2023-11-14", "22:13:20", "UTC",
    ]  # fmt: skip
    assert lines[2].split()[:6] == ["dl-2", "wf-welcome@3", "#1", "5", "WEBHOOK_FAILED", "redriven"]
    requests = stub.requests("ListDeadLetters")
    assert [(r.page_token, r.page_size) for r in requests] == [("", 200), ("t1", 200)]
    assert {(r.project_id, r.workflow_id, r.reason, r.status) for r in requests} == {
        ("shop", "wf-welcome", "WEBHOOK_FAILED", "all")
    }


def test_dlq_list_defaults_to_the_servers_open_entries(tmp_path: Path) -> None:
    stub = FakeStub({"ListDeadLetters": ins.ListDeadLettersResponse()})
    result = run_cli(["dlq", "list"], stub, cwd=tmp_path)
    assert (result.code, result.out) == (0, "No dead letters.\n")
    [request] = stub.requests("ListDeadLetters")
    assert (request.status, request.page_size, request.page_token) == ("", 0, "")


def test_dlq_show_has_every_field_and_the_full_error(tmp_path: Path) -> None:
    trap = "wasm trap: unreachable\n  at score (0x1f)\n  at run (0x2a)"
    reply = ins.GetDeadLetterResponse(
        dead_letter=dead_letter(error=trap, status="redriven", redrive_instance_id="in-9")
    )
    stub = FakeStub({"GetDeadLetter": reply})
    result = run_cli(["dlq", "show", "dl-1"], stub, cwd=tmp_path)
    assert result.code == 0
    assert stub.requests("GetDeadLetter")[0].id == "dl-1"
    assert result.out == (
        "ID:           dl-1\n"
        "Status:       redriven\n"
        "Reason:       WEBHOOK_FAILED\n"
        "Workflow:     wf-welcome@3\n"
        "Step:         #2 notify\n"
        "Attempts:     5\n"
        f"Event:        {EVENT_ID}\n"
        "Instance:     in-1\n"
        "Redriven as:  in-9\n"
        "Project:      acme/shop\n"
        "Environment:  production\n"
        "Created:      2023-11-14 22:13:20 UTC\n"
        "\n"
        f"Error:\n{trap}\n"
    )
    as_json = run_cli(["dlq", "show", "dl-1", "-o", "json"], stub, cwd=tmp_path)
    assert json.loads(as_json.out)["error"] == trap


@pytest.mark.parametrize(("flags", "from_start"), [([], False), (["--from-start"], True)])
def test_dlq_redrive_prints_the_new_instance_id(
    flags: list[str], from_start: bool, tmp_path: Path
) -> None:
    reply = ins.RedriveDeadLetterResponse(
        dead_letter=dead_letter(status="redriven", redrive_instance_id="in-9"), instance_id="in-9"
    )
    stub = FakeStub({"RedriveDeadLetter": reply})
    result = run_cli(["dlq", "redrive", "dl-1", *flags], stub, cwd=tmp_path)
    assert (result.code, result.out, result.err) == (0, "in-9\n", "")
    [request] = stub.requests("RedriveDeadLetter")
    assert (request.id, request.from_start) == ("dl-1", from_start)
    as_json = run_cli(["dlq", "redrive", "dl-1", "-o", "json"], stub, cwd=tmp_path)
    printed = json.loads(as_json.out)
    assert (printed["instance_id"], printed["dead_letter"]["status"]) == ("in-9", "redriven")


def test_dlq_discard(tmp_path: Path) -> None:
    reply = ins.DiscardDeadLetterResponse(dead_letter=dead_letter(status="discarded"))
    stub = FakeStub({"DiscardDeadLetter": reply})
    result = run_cli(["dlq", "discard", "dl-1"], stub, cwd=tmp_path)
    assert (result.code, result.out) == (0, "discarded dead letter dl-1\n")
    assert stub.requests("DiscardDeadLetter")[0].id == "dl-1"
    as_json = run_cli(["dlq", "discard", "dl-1", "-o", "json"], stub, cwd=tmp_path)
    assert json.loads(as_json.out)["status"] == "discarded"


def test_redriving_a_discarded_entry_exits_1_with_the_reason(tmp_path: Path) -> None:
    refused = rpc_error(
        EventflowError(
            grpc.StatusCode.FAILED_PRECONDITION, "DEAD_LETTER_DISCARDED", "dl-1 was discarded"
        )
    )
    stub = FakeStub({"RedriveDeadLetter": refused})
    result = run_cli(["dlq", "redrive", "dl-1"], stub, cwd=tmp_path)
    assert (result.code, result.out) == (1, "")
    assert result.err == "error: DEAD_LETTER_DISCARDED: dl-1 was discarded\n"


# ------------------------------------------------------------ wiring, views


def test_each_group_calls_its_own_service(tmp_path: Path) -> None:
    events = FakeStub({"GetEvent": es.GetEventResponse(event=event())})
    instances = FakeStub({"GetInstance": ins.GetInstanceResponse(instance=instance())})
    dead_letters = FakeStub({"GetDeadLetter": ins.GetDeadLetterResponse(dead_letter=dead_letter())})

    @contextmanager
    def connect(settings: Settings) -> Iterator[Client]:
        yield Client(
            FakeStub({}),
            FakeStub({}),
            settings.api_key,
            events=events,
            instances=instances,
            dead_letters=dead_letters,
        )

    for argv in (["events", "get", "e"], ["instances", "get", "i"], ["dlq", "show", "d"]):
        code = cli_main.run(
            argv, connect=connect, env={}, cwd=tmp_path, out=io.StringIO(), err=io.StringIO()
        )
        assert code == 0
    assert [len(s.calls) for s in (events, instances, dead_letters)] == [1, 1, 1]


@pytest.mark.parametrize(
    "argv",
    [
        ["events", "get", "e"],
        ["events", "publish", "--type", "a", "--data", "{}"],
        ["instances", "log", "i"],
        ["dlq", "show", "d"],
        ["projections", "get", "o", "t", "1"],
        ["workflows", "test", "w", "--payload", "{}", "--dry-run"],
        ["sandbox", "reset", "--yes"],
        ["events", "replay", "e"],
        ["pause", "--project"],
        ["instances", "pause", "i"],
    ],
)
def test_the_real_client_has_the_orchestrator_stubs(argv: list[str], tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = cli_main.run(
        ["--server", "127.0.0.1:1", "--api-key", KEY, *argv],
        connect=open_client,
        env={},
        cwd=tmp_path,
        out=out,
        err=err,
    )
    assert code == 1
    assert err.getvalue().startswith("error: UNAVAILABLE: ")


@pytest.mark.parametrize(
    ("text", "compact", "pretty"),
    [
        ("", "", "-"),
        ('{"a": [1, 2]}', '{"a":[1,2]}', '{\n  "a": [\n    1,\n    2\n  ]\n}'),
        ("not json", "not json", "not json"),
        ('{"é": "ü"}', '{"é":"ü"}', '{\n  "é": "ü"\n}'),
    ],
)
def test_json_texts_are_reshaped_or_kept(text: str, compact: str, pretty: str) -> None:
    assert (compact_json(text), pretty_json(text)) == (compact, pretty)


def test_dlq_list_passes_a_time_window_and_refuses_a_bad_time() -> None:
    from cli.main import main

    assert main(["dlq", "list", "--since", "yesterday"]) == 2
