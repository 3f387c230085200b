"""``eventflow events replay``, ``instances pause|resume|cancel``, and the scoped
``pause|resume|cancel|holds`` commands, against fake stubs in the real Client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from eventflow.orchestrator.v1 import event_pb2
from eventflow.orchestrator.v1 import event_service_pb2 as es
from eventflow.orchestrator.v1 import instance_service_pb2 as ins

from cli.errors import UsageError
from cli.events import parse_time
from libs.errors import failed_precondition, permission_denied
from tests.cli.fakes import FakeStub
from tests.cli.test_cli_orchestrator import EVENT_ID, instance, rpc_error, run_cli


def test_replay_one_event_lists_the_instances_it_started(tmp_path: Path) -> None:
    stub = FakeStub(
        {"ReplayEvent": es.ReplayEventResponse(replay_id="r-1", instance_ids=["in-1", "in-2"])}
    )
    result = run_cli(["--project", "shop", "events", "replay", EVENT_ID], stub, cwd=tmp_path)
    assert result.code == 0, result.err
    [request] = stub.requests("ReplayEvent")
    assert (request.event_id, request.project_id, request.with_side_effects) == (
        EVENT_ID,
        "shop",
        False,
    )
    assert "started 2 instance(s)" in result.out and "in-2" in result.out


def test_replay_with_side_effects_is_asked_for_explicitly(tmp_path: Path) -> None:
    stub = FakeStub({"ReplayEvent": es.ReplayEventResponse(replay_id="r-1")})
    result = run_cli(["events", "replay", EVENT_ID, "--with-side-effects"], stub, cwd=tmp_path)
    assert result.code == 0
    assert stub.requests("ReplayEvent")[0].with_side_effects
    assert "no active workflow matches" in result.out


def test_a_range_replay_prints_progress_and_the_count(tmp_path: Path) -> None:
    updates = [
        es.ReplayEventsResponse(replay_id="r-2", matched=250, replayed=100, instances_started=100),
        es.ReplayEventsResponse(replay_id="r-2", matched=250, replayed=200, instances_started=200),
        es.ReplayEventsResponse(
            replay_id="r-2", matched=250, replayed=250, instances_started=250, done=True
        ),
    ]
    stub = FakeStub({"ReplayEvents": lambda request: iter(updates)})
    result = run_cli(
        [
            "events",
            "replay",
            "--type",
            "order.created",
            "--since",
            "2h",
            "--until",
            "2026-11-30T10:00",
        ],
        stub,
        cwd=tmp_path,
    )
    assert result.code == 0, result.err
    [request] = stub.requests("ReplayEvents")
    assert request.type == "order.created"
    assert request.end_time.ToDatetime(tzinfo=UTC) == datetime(2026, 11, 30, 10, tzinfo=UTC)
    ago = datetime.now(UTC) - request.start_time.ToDatetime(tzinfo=UTC)
    assert timedelta(hours=2) <= ago < timedelta(hours=2, minutes=1)
    # No deadline on the stream: a long range must not be cut off.
    assert stub.calls[0][3] is None
    assert "replayed 100/250 events" in result.err and "replayed 200/250" in result.err
    assert "replayed 250 of 250 events, started 250 instance(s)" in result.out


@pytest.mark.parametrize(
    "argv",
    [
        ["events", "replay"],
        ["events", "replay", EVENT_ID, "--type", "x"],
        ["events", "replay", "--since", "yesterday"],
    ],
)
def test_replay_usage_errors_exit_2_before_connecting(argv: list[str], tmp_path: Path) -> None:
    stub = FakeStub({})
    result = run_cli(argv, stub, cwd=tmp_path)
    assert result.code == 2
    assert stub.calls == []


def test_parse_time_reads_iso_and_spans() -> None:
    assert parse_time("2026-01-02T03:04:05+01:00", "--since").ToDatetime(tzinfo=UTC) == datetime(
        2026, 1, 2, 2, 4, 5, tzinfo=UTC
    )
    with pytest.raises(UsageError, match="--until"):
        parse_time("5 minutes", "--until")


@pytest.mark.parametrize(
    ("verb", "method", "status"),
    [
        ("pause", "PauseInstance", "paused"),
        ("resume", "ResumeInstance", "running"),
        ("cancel", "CancelInstance", "canceled"),
    ],
)
def test_instance_pause_resume_cancel(verb: str, method: str, status: str, tmp_path: Path) -> None:
    reply = getattr(ins, f"{method}Response")(instance=instance(status=status))
    stub = FakeStub({method: reply})
    result = run_cli(["instances", verb, "in-1"], stub, cwd=tmp_path)
    assert result.code == 0, result.err
    assert stub.requests(method)[0].id == "in-1"
    assert status in result.out


def test_a_refused_change_shows_the_reason(tmp_path: Path) -> None:
    refused = rpc_error(failed_precondition("INSTANCE_TERMINAL", "instance in-1 is completed"))
    stub = FakeStub({"PauseInstance": refused})
    result = run_cli(["instances", "pause", "in-1"], stub, cwd=tmp_path)
    assert result.code == 1
    assert "instance in-1 is completed" in result.err


def test_scoped_pause_by_subject_uses_the_default_project(tmp_path: Path) -> None:
    hold = ins.Hold(organization_id="acme", project_id="shop", subject="u-1", scope="subject")
    stub = FakeStub({"PauseInstances": ins.PauseInstancesResponse(paused=3, hold=hold)})
    result = run_cli(
        ["pause", "--subject", "u-1"], stub, cwd=tmp_path, env={"EVENTFLOW_PROJECT": "shop"}
    )
    assert result.code == 0, result.err
    scope = stub.requests("PauseInstances")[0].scope
    assert (scope.project_id, scope.subject, scope.organization) == ("shop", "u-1", False)
    assert "paused 3 running instance(s)" in result.out


@pytest.mark.parametrize(
    ("argv", "project", "organization"),
    [
        (["resume", "--project"], "shop", False),
        (["resume", "--project", "other"], "other", False),
        (["resume", "--org"], "", True),
    ],
)
def test_scoped_resume_scopes(
    argv: list[str], project: str, organization: bool, tmp_path: Path
) -> None:
    stub = FakeStub({"ResumeInstances": ins.ResumeInstancesResponse(resumed=2)})
    result = run_cli(argv, stub, cwd=tmp_path, env={"EVENTFLOW_PROJECT": "shop"})
    assert result.code == 0, result.err
    scope = stub.requests("ResumeInstances")[0].scope
    assert (scope.project_id, scope.organization) == (project, organization)
    assert "resumed 2 instance(s)" in result.out


def test_a_scope_is_required_and_exclusive(tmp_path: Path) -> None:
    for argv in (["pause"], ["pause", "--org", "--subject", "u"]):
        stub = FakeStub({})
        assert run_cli(argv, stub, cwd=tmp_path).code == 2
        assert stub.calls == []


def test_scoped_cancel_needs_yes_without_a_terminal(tmp_path: Path) -> None:
    stub = FakeStub({"CancelInstances": ins.CancelInstancesResponse(canceled=4)})
    assert run_cli(["cancel", "--project"], stub, cwd=tmp_path).code == 2  # no terminal, no --yes
    assert stub.calls == []
    result = run_cli(["cancel", "--subject", "u", "--yes"], stub, cwd=tmp_path)
    assert result.code == 0 and "canceled 4 instance(s)" in result.out


def test_holds_lists_what_is_paused(tmp_path: Path) -> None:
    stub = FakeStub(
        {
            "ListHolds": ins.ListHoldsResponse(
                holds=[ins.Hold(organization_id="acme", scope="organization")]
            )
        }
    )
    result = run_cli(["holds"], stub, cwd=tmp_path)
    assert result.code == 0
    assert "organization" in result.out and "*" in result.out
    empty = run_cli(["holds"], FakeStub({"ListHolds": ins.ListHoldsResponse()}), cwd=tmp_path)
    assert "nothing is paused" in empty.out


def test_org_stop_denied_is_reported(tmp_path: Path) -> None:
    denied = rpc_error(permission_denied("ROLE_TOO_LOW", "organization scope needs the admin role"))
    result = run_cli(["pause", "--org"], FakeStub({"PauseInstances": denied}), cwd=tmp_path)
    assert result.code == 1
    assert result.err == "error: ROLE_TOO_LOW: organization scope needs the admin role\n"


def test_reactions_wait_polls_until_every_run_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cli.events.WAIT_POLL_S", 0)

    def reactions(*statuses: str) -> es.ListEventReactionsResponse:
        return es.ListEventReactionsResponse(
            reactions=[
                event_pb2.Reaction(instance_id=f"in-{s}", instance_status=s) for s in statuses
            ]
        )

    stub = FakeStub(
        {
            "ListEventReactions": [
                reactions(),
                reactions("running"),
                reactions("failed", "running"),
                reactions("failed", "completed"),
            ]
        }
    )
    result = run_cli(["events", "reactions", EVENT_ID, "--wait"], stub, cwd=tmp_path)
    assert result.code == 0, result.err
    assert len(stub.requests("ListEventReactions")) == 4
    assert "completed" in result.out


def test_reactions_wait_gives_up_with_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cli.events.WAIT_POLL_S", 0.3)
    running = es.ListEventReactionsResponse(
        reactions=[event_pb2.Reaction(instance_id="in-1", instance_status="running")]
    )
    stub = FakeStub({"ListEventReactions": lambda request: running})
    result = run_cli(
        ["events", "reactions", EVENT_ID, "--wait", "--timeout", "1"], stub, cwd=tmp_path
    )
    assert result.code == 1
    assert "still running after 1 s" in result.err
