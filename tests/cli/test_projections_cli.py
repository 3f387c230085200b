"""``eventflow projections ...`` without a server.

Commands run end to end through ``cli.main.run`` against a fake
ProjectionService stub, so the requests built and the text printed are
exactly what a user would get.
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
from eventflow.orchestrator.v1 import projection_pb2
from eventflow.orchestrator.v1 import projection_service_pb2 as pb
from google.protobuf.timestamp_pb2 import Timestamp

from cli import main as cli_main
from cli.client import Client
from cli.profile import Settings
from cli.projection_views import CELL_WIDTH
from libs.errors import EventflowError, FieldViolation, invalid_argument, not_found
from tests.cli.fakes import FakeStub, Result
from tests.fakes import RichRpcError

KEY = "efk_test_secret_value"
T0 = Timestamp(seconds=1_700_000_000)
T1 = Timestamp(seconds=1_700_000_060)
EVENT_ID = "0b6c0000-0000-4000-8000-0000000000e1"
CUT_NOTE = "note: long data is cut short; --output json shows it whole\n"


def run_cli(argv: list[str], stub: FakeStub | None = None, *, cwd: Path) -> Result:
    stub = stub or FakeStub({})

    @contextmanager
    def connect(settings: Settings) -> Iterator[Client]:
        yield Client(FakeStub({}), FakeStub({}), settings.api_key, projections=stub)

    out, err = io.StringIO(), io.StringIO()
    code = cli_main.run(
        ["--api-key", KEY, *argv], connect=connect, env={}, cwd=cwd, out=out, err=err
    )
    return Result(code, out.getvalue(), err.getvalue())


def rpc_error(error: EventflowError) -> RichRpcError:
    return RichRpcError(error.to_status())


def projection(**fields: Any) -> projection_pb2.Projection:
    defaults: dict[str, Any] = dict(
        id="7f1c0000-0000-4000-8000-000000000001",
        organization_id="acme",
        project_id="shop",
        environment="production",
        name="orders",
        entity_type="order",
        entity_id="17",
        title="Order 17",
        status="paid",
        data_json='{"total": 12.5, "items": ["A1"]}',
        last_event_id=EVENT_ID,
        last_instance_id="in-1",
        create_time=T0,
        update_time=T1,
    )
    return projection_pb2.Projection(**{**defaults, **fields})


def write(**fields: Any) -> projection_pb2.ProjectionWrite:
    defaults: dict[str, Any] = dict(
        event_id=EVENT_ID,
        instance_id="in-1",
        workflow_id="wf-orders",
        workflow_version=2,
        step=0,
        title="Order 17",
        status="paid",
        data_json='{"total": 12.5}',
        write_time=T1,
    )
    return projection_pb2.ProjectionWrite(**{**defaults, **fields})


@pytest.mark.parametrize(
    "argv",
    [
        ["projections"],
        ["projections", "bogus"],
        ["projections", "get", "orders", "order"],
        ["projections", "get", "orders", "order", "17", "--env", "staging"],
        ["projections", "list"],
        ["projections", "list", "orders", "--page-size", "0"],
        ["projections", "history", "orders"],
    ],
)
def test_usage_errors_exit_2_without_a_call(argv: list[str], tmp_path: Path) -> None:
    stub = FakeStub({})
    assert run_cli(argv, stub, cwd=tmp_path).code == 2
    assert stub.calls == []


def test_get_shows_every_field_and_the_data_whole(tmp_path: Path) -> None:
    stub = FakeStub({"GetProjection": pb.GetProjectionResponse(projection=projection())})
    argv = ["projections", "get", "orders", "order", "17", "--env", "sandbox", "--project", "shop"]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert (result.code, result.err) == (0, "")
    [request] = stub.requests("GetProjection")
    assert (
        request.project_id,
        request.environment,
        request.name,
        request.entity_type,
        request.entity_id,
    ) == ("shop", "sandbox", "orders", "order", "17")
    assert result.out.splitlines() == [
        "Name:           orders",
        "Entity:         order/17",
        "Title:          Order 17",
        "Status:         paid",
        "Project:        acme/shop",
        "Environment:    production",
        f"Last event:     {EVENT_ID}",
        "Last instance:  in-1",
        "Created:        2023-11-14 22:13:20 UTC",
        "Updated:        2023-11-14 22:14:20 UTC",
        "ID:             7f1c0000-0000-4000-8000-000000000001",
        "",
        "Data:",
        "{",
        '  "total": 12.5,',
        '  "items": [',
        '    "A1"',
        "  ]",
        "}",
    ]


def test_get_json_prints_the_projection(tmp_path: Path) -> None:
    stub = FakeStub({"GetProjection": pb.GetProjectionResponse(projection=projection())})
    result = run_cli(
        ["projections", "get", "orders", "order", "17", "-o", "json"], stub, cwd=tmp_path
    )
    printed = json.loads(result.out)
    assert (printed["entity_id"], printed["last_event_id"]) == ("17", EVENT_ID)
    assert stub.requests("GetProjection")[0].environment == ""  # the server's default


def test_get_unknown_projection_exits_1(tmp_path: Path) -> None:
    stub = FakeStub({"GetProjection": rpc_error(not_found("projection", "orders/order/9"))})
    result = run_cli(["projections", "get", "orders", "order", "9"], stub, cwd=tmp_path)
    assert (result.code, result.out) == (1, "")
    assert result.err == "error: NOT_FOUND: projection 'orders/order/9' not found\n"


def test_a_refused_argument_is_named(tmp_path: Path) -> None:
    refused = invalid_argument([FieldViolation("entity_type", "must be 1-64 characters")])
    stub = FakeStub({"GetProjection": rpc_error(refused)})
    result = run_cli(["projections", "get", "orders", "Order", "9"], stub, cwd=tmp_path)
    assert result.code == 1
    assert result.err.splitlines()[-1] == "  entity_type: must be 1-64 characters"


def test_sandbox_refused_by_the_plan_exits_1_with_the_reason(tmp_path: Path) -> None:
    refused = EventflowError(
        grpc.StatusCode.FAILED_PRECONDITION, "SANDBOX_DISABLED", "the starter plan has no sandbox"
    )
    stub = FakeStub({"ListProjections": rpc_error(refused)})
    result = run_cli(["projections", "list", "orders", "--env", "sandbox"], stub, cwd=tmp_path)
    assert (result.code, result.err) == (
        1,
        "error: SANDBOX_DISABLED: the starter plan has no sandbox\n",
    )


def test_list_all_follows_every_page_with_the_filters(tmp_path: Path) -> None:
    pages = [
        pb.ListProjectionsResponse(projections=[projection()], next_page_token="t1"),
        pb.ListProjectionsResponse(
            projections=[projection(entity_type="", entity_id="", title="", data_json="null")]
        ),
    ]
    stub = FakeStub({"ListProjections": pages})
    argv = [
        "projections", "list", "orders", "--all", "--type", "order", "--status", "paid",
        "--env", "sandbox", "--project", "shop",
    ]  # fmt: skip
    result = run_cli(argv, stub, cwd=tmp_path)
    assert (result.code, result.err) == (0, "")
    lines = result.out.splitlines()
    assert lines[0].split() == ["ENTITY", "TITLE", "STATUS", "LAST", "EVENT", "UPDATED", "DATA"]
    assert lines[1].split() == [
        "order/17", "Order", "17", "paid", EVENT_ID, "2023-11-14", "22:14:20", "UTC",
        '{"total":12.5,"items":["A1"]}',
    ]  # fmt: skip
    assert lines[2].split() == [
        "-", "-", "paid", EVENT_ID, "2023-11-14", "22:14:20", "UTC", "null",
    ]  # fmt: skip
    requests = stub.requests("ListProjections")
    assert [(r.page_token, r.page_size) for r in requests] == [("", 200), ("t1", 200)]
    assert {(r.project_id, r.environment, r.name, r.entity_type, r.status) for r in requests} == {
        ("shop", "sandbox", "orders", "order", "paid")
    }


def test_list_cuts_long_data_and_hints_at_more_pages(tmp_path: Path) -> None:
    long = json.dumps({"notes": "n" * 200})
    reply = pb.ListProjectionsResponse(
        projections=[projection(data_json=long)], next_page_token="tok"
    )
    stub = FakeStub({"ListProjections": reply})
    result = run_cli(["projections", "list", "orders", "--page-size", "5"], stub, cwd=tmp_path)
    data = result.out.splitlines()[1].split()[-1]
    assert data.startswith('{"notes":"nnn') and data.endswith("…")
    assert len(data) == CELL_WIDTH
    assert result.err == CUT_NOTE + "more results: rerun with --all or --page-token tok\n"
    [request] = stub.requests("ListProjections")
    assert (request.page_size, request.page_token, request.entity_type, request.status) == (
        5,
        "",
        "",
        "",
    )
    as_json = run_cli(["projections", "list", "orders", "-o", "json"], stub, cwd=tmp_path)
    printed = json.loads(as_json.out)
    assert json.loads(printed["projections"][0]["data_json"]) == {"notes": "n" * 200}
    assert (printed["next_page_token"], as_json.err) == ("tok", "")


def test_an_empty_list(tmp_path: Path) -> None:
    stub = FakeStub({"ListProjections": pb.ListProjectionsResponse()})
    result = run_cli(["projections", "list", "orders"], stub, cwd=tmp_path)
    assert (result.code, result.out, result.err) == (0, "No projections.\n", "")


def test_history_lists_each_write_with_its_event_and_replays_marked(tmp_path: Path) -> None:
    reply = pb.ListProjectionHistoryResponse(
        writes=[
            write(replay=True, status="refunded"),
            write(event_id="evt-0", instance_id="in-0", step=2, write_time=T0),
        ]
    )
    stub = FakeStub({"ListProjectionHistory": reply})
    argv = ["projections", "history", "orders", "order", "17", "--page-size", "2"]
    result = run_cli(argv, stub, cwd=tmp_path)
    assert (result.code, result.err) == (0, "")
    lines = result.out.splitlines()
    assert lines[0].split() == [
        "WRITTEN", "EVENT", "INSTANCE", "WORKFLOW", "STEP", "STATUS", "REPLAY", "DATA",
    ]  # fmt: skip
    assert lines[1].split() == [
        "2023-11-14", "22:14:20", "UTC", EVENT_ID, "in-1", "wf-orders@2", "1", "refunded",
        "replay", '{"total":12.5}',
    ]  # fmt: skip
    assert lines[2].split()[3:] == ["evt-0", "in-0", "wf-orders@2", "3", "paid", "-",
                                    '{"total":12.5}']  # fmt: skip
    [request] = stub.requests("ListProjectionHistory")
    assert (request.name, request.entity_type, request.entity_id, request.page_size) == (
        "orders",
        "order",
        "17",
        2,
    )


def test_history_json_and_empty(tmp_path: Path) -> None:
    stub = FakeStub({"ListProjectionHistory": pb.ListProjectionHistoryResponse()})
    result = run_cli(["projections", "history", "orders", "order", "17"], stub, cwd=tmp_path)
    assert (result.code, result.out) == (0, "No writes.\n")
    stub = FakeStub({"ListProjectionHistory": pb.ListProjectionHistoryResponse(writes=[write()])})
    argv = ["projections", "history", "orders", "order", "17", "-o", "json"]
    printed = json.loads(run_cli(argv, stub, cwd=tmp_path).out)
    assert printed["writes"][0]["event_id"] == EVENT_ID


def test_help_lists_the_projections_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(["--help"], cwd=tmp_path).code == 0
    assert "\n    projections " in capsys.readouterr().out
