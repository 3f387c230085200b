"""The CLI without a server: parsing, settings, rendering, files, errors.

Commands run end to end through ``cli.main.run`` against fake stubs wrapped
in the real ``Client``, so the requests built, the metadata sent and the text
printed are exactly what a user would get.
"""

from __future__ import annotations

import io
import json
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest
from eventflow.registry.v1 import tenancy_service_pb2 as ts
from eventflow.registry.v1 import workflow_pb2
from eventflow.registry.v1 import workflow_service_pb2 as ws
from google.protobuf.timestamp_pb2 import Timestamp

from cli import main as cli_main
from cli.client import Client, open_client
from cli.errors import UsageError, print_rpc_error
from cli.output import duration, render_fields, render_table
from cli.profile import DEFAULT_SERVER, Profile, Settings, find_profile, load_profile, resolve
from cli.workflow_file import load_workflow, parse_mask, parse_workflow, update_mask
from cli.workflow_views import preview, publish_outcome, steps_table, workflow_list
from libs.errors import EventflowError, FieldViolation, invalid_argument
from tests.fakes import RichRpcError

KEY = "efk_test_secret_value"

WORKFLOW_FILE = {
    "name": "Welcome email",
    "trigger_event": "user.signed_up",
    "environment": "production",
    "steps": [
        {"name": "notify", "type": "webhook", "url": "https://hooks.example.com/x"},
        {"type": "delay", "duration_ms": 5400000},
        {
            "type": "custom_action",
            "action": "score",
            "version": 3,
            "retry": {"max_attempts": 2, "backoff": "fixed", "backoff_delay_ms": 2000},
        },
    ],
    "reentry": {"mode": "cooldown", "cooldown_minutes": 30},
}


# --------------------------------------------------------------------- fakes


class FakeStub:
    """Answers each method from ``replies``; records (method, request, metadata)."""

    def __init__(self, replies: dict[str, Any]) -> None:
        self.replies = replies
        self.calls: list[tuple[str, Any, Any]] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def method(request: Any, metadata: Any = None, timeout: Any = None) -> Any:
            self.calls.append((name, request, metadata))
            reply = self.replies[name]
            if isinstance(reply, BaseException):
                raise reply
            if isinstance(reply, list):
                return reply.pop(0)
            return reply(request) if callable(reply) else reply

        return method

    def requests(self, name: str) -> list[Any]:
        return [request for method, request, _ in self.calls if method == name]


def rpc_error(error: EventflowError) -> RichRpcError:
    return RichRpcError(error.to_status())


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err


def run_cli(
    argv: list[str],
    stub: FakeStub | None = None,
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: str = "",
) -> Result:
    stub = stub or FakeStub({})
    seen: list[Settings] = []

    @contextmanager
    def connect(settings: Settings) -> Iterator[Client]:
        seen.append(settings)
        yield Client(stub, stub, settings.api_key)

    out, err = io.StringIO(), io.StringIO()
    code = cli_main.run(
        argv,
        connect=connect,
        env=env or {},
        cwd=cwd,
        out=out,
        err=err,
        stdin=io.StringIO(stdin),
    )
    return Result(code, out.getvalue(), err.getvalue())


def stored(**fields: Any) -> workflow_pb2.Workflow:
    workflow = workflow_pb2.Workflow(
        id="wf-1",
        organization_id="acme",
        project_id="shop",
        status="draft",
        create_time=Timestamp(seconds=1_700_000_000),
    )
    for key, value in fields.items():
        setattr(workflow, key, value)
    return workflow


@pytest.fixture
def wf_file(tmp_path: Path) -> Path:
    path = tmp_path / "wf.json"
    path.write_text(json.dumps(WORKFLOW_FILE, indent=2))
    return path


@pytest.fixture
def profile_dir(tmp_path: Path) -> Path:
    """A checkout whose dev stack wrote credentials; commands run in a subdirectory."""
    (tmp_path / ".eventflow").mkdir()
    (tmp_path / ".eventflow" / "credentials.json").write_text(
        json.dumps(
            {"server": "10.0.0.1:7000", "api_key": KEY, "organization": "demo", "project": "demo"}
        )
    )
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    return nested


# ------------------------------------------------------------------- parsing


def test_global_options_work_before_and_after_the_subcommand() -> None:
    parser = cli_main.build_parser()
    before = parser.parse_args(["--server", "h:1", "-o", "json", "workflows", "get", "x"])
    after = parser.parse_args(["workflows", "get", "x", "--server", "h:1", "--output", "json"])
    for args in (before, after):
        assert (args.server, args.output, args.id) == ("h:1", "json", "x")


def test_options_not_given_stay_absent_so_env_and_profile_can_apply() -> None:
    args = cli_main.build_parser().parse_args(["--project", "p", "workflows", "list"])
    assert args.project == "p"
    assert not hasattr(args, "server")
    assert not hasattr(args, "api_key")


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["workflows"],
        ["workflows", "create"],
        ["workflows", "bogus"],
        ["workflows", "list", "--output", "yaml"],
        ["workflows", "list", "--page-size", "0"],
        ["workflows", "version", "wf-1", "zero"],
        ["admin", "orgs", "set-plan", "acme", "gold"],
        ["admin", "keys", "create"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], tmp_path: Path) -> None:
    assert run_cli(argv, cwd=tmp_path).code == 2


def test_help_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["workflows", "update", "--help"], cwd=tmp_path).code == 0
    assert "--mask" in capsys.readouterr().out


def test_dev_and_serve_delegate_to_the_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, Any]] = []

    def run_dev(args: Any) -> int:
        calls.append(("dev", args.command))
        return 0

    def run_serve(service: str, config: Path | None) -> int:
        calls.append((service, config))
        return 3

    # A stand-in module: the real stack would start servers and a database.
    fake = types.SimpleNamespace(run_dev=run_dev, run_serve=run_serve)
    monkeypatch.setitem(sys.modules, "cli.stack", fake)
    assert run_cli(["dev"], cwd=tmp_path).code == 0
    assert run_cli(["serve", "registry", "--config", "c.toml"], cwd=tmp_path).code == 3
    assert run_cli(["serve", "vault"], cwd=tmp_path).code == 3
    assert calls == [("dev", "dev"), ("registry", Path("c.toml")), ("vault", None)]


# ------------------------------------------------------------------ settings


def test_profile_is_found_by_walking_up(profile_dir: Path) -> None:
    found = find_profile(profile_dir)
    assert found is not None and found.parts[-2:] == (".eventflow", "credentials.json")
    assert load_profile(profile_dir).values["project"] == "demo"


def test_resolution_order_is_flag_env_profile_default() -> None:
    profile = Profile(Path("p"), {"server": "prof:1", "api_key": "kp", "project": "pp"})
    env = {"EVENTFLOW_SERVER": "env:1", "EVENTFLOW_API_KEY": "ke", "EVENTFLOW_PROJECT": "pe"}
    flags = {"server": "flag:1", "api_key": "kf", "project": "pf", "output": "json"}
    none = {"server": None, "api_key": None, "project": None, "output": None}

    assert resolve(**flags, env=env, profile=profile) == Settings("flag:1", "kf", "pf", "json")
    assert resolve(**none, env=env, profile=profile) == Settings("env:1", "ke", "pe", "table")
    assert resolve(**none, env={}, profile=profile) == Settings("prof:1", "kp", "pp", "table")
    assert resolve(**none, env={}, profile=Profile()) == Settings(DEFAULT_SERVER, "", "", "table")
    # An explicit empty flag still wins: `--project ""` means the key's project.
    assert resolve(**{**none, "project": ""}, env=env, profile=profile).project == ""


def test_a_broken_profile_is_ignored_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".eventflow").mkdir()
    (tmp_path / ".eventflow" / "credentials.json").write_text("{not json")
    assert load_profile(tmp_path) == Profile()
    assert "warning: ignoring" in capsys.readouterr().err


def test_settings_repr_hides_the_key() -> None:
    assert KEY not in repr(Settings("h:1", KEY, "p", "table"))


def test_commands_use_the_profile_and_send_the_key_as_bearer(profile_dir: Path) -> None:
    stub = FakeStub({"ListWorkflows": ws.ListWorkflowsResponse()})
    result = run_cli(["workflows", "list"], stub, cwd=profile_dir)
    assert result.code == 0
    [(_, request, metadata)] = stub.calls
    assert request.project_id == "demo"
    assert dict(metadata) == {"authorization": f"Bearer {KEY}"}
    assert KEY not in result.out + result.err


# ----------------------------------------------------------------- rendering


def test_table_is_aligned_without_trailing_spaces() -> None:
    text = render_table(("ID", "NAME"), [("a", "long name"), ("bbbb", "")])
    assert text.splitlines() == ["ID    NAME", "a     long name", "bbbb  -"]


def test_table_truncates_and_flattens_cells() -> None:
    text = render_table(("V",), [("x" * 10,), ("a\nb",)], max_width=5)
    assert text.splitlines() == ["V", "xxxx…", "a b"]


def test_fields_align_values() -> None:
    assert render_fields([("ID", "1"), ("Status", "")]) == "ID:      1\nStatus:  -"


@pytest.mark.parametrize(
    ("ms", "text"),
    [(1500, "1500ms"), (5000, "5s"), (90_000, "1m30s"), (5_400_000, "1h30m"), (86_400_000, "1d")],
)
def test_durations(ms: int, text: str) -> None:
    assert duration(ms) == text


def test_steps_table_shows_targets_attempts_and_backoff() -> None:
    workflow, _ = parse_workflow(json.dumps(WORKFLOW_FILE), "wf.json")
    lines = steps_table(workflow.steps).splitlines()
    assert lines[0].split() == ["#", "NAME", "TYPE", "TARGET", "ATTEMPTS", "BACKOFF"]
    assert lines[1].split() == ["1", "notify", "webhook", "https://hooks.example.com/x", "-", "-"]
    assert lines[2].split() == ["2", "-", "delay", "1h30m", "-", "-"]
    assert lines[3].split() == ["3", "-", "custom_action", "score@3", "2", "fixed", "2s"]


def test_workflow_list_marks_unpublished_changes() -> None:
    rows = [
        stored(name="A", trigger_event="a", status="draft"),
        stored(name="B", status="active", published_version=4, has_unpublished_changes=True),
    ]
    lines = workflow_list(rows).splitlines()
    assert lines[0].split() == ["ID", "NAME", "TRIGGER", "ENV", "STATUS", "VERSION", "DRAFT"]
    assert lines[1].split() == ["wf-1", "A", "a", "-", "draft", "-", "-"]
    assert lines[2].split()[-2:] == ["4", "modified"]
    assert workflow_list([]) == "No workflows."


def test_publish_outcomes_and_preview_texts() -> None:
    version = workflow_pb2.WorkflowVersion(version=3)
    unchanged = ws.PublishWorkflowResponse(outcome=ws.PUBLISH_OUTCOME_UNCHANGED, version=version)
    published = ws.PublishWorkflowResponse(outcome=ws.PUBLISH_OUTCOME_PUBLISHED, version=version)
    assert publish_outcome(unchanged) == "UNCHANGED: draft equals version 3"
    assert publish_outcome(published) == "published version 3"
    assert preview(ws.PreviewPublishResponse(unchanged=True, base_version=2)) == (
        "no changes since version 2"
    )
    change = ws.FieldChange(path="steps[0].url", kind="changed", before='"a"', after='"b"')
    text = preview(ws.PreviewPublishResponse(base_version=2, changes=[change]))
    assert text.splitlines()[0] == "changes since version 2:"
    assert text.splitlines()[2].split() == ["steps[0].url", "changed", '"a"', '"b"']


# ------------------------------------------------------------ workflow files


def test_a_valid_file_parses_and_names_its_mask_paths(wf_file: Path) -> None:
    loaded = load_workflow(str(wf_file))
    assert loaded.workflow.steps[2].retry.max_attempts == 2
    assert loaded.present == ["name", "trigger_event", "environment", "steps", "reentry"]


def test_camel_case_keys_count_for_the_mask() -> None:
    loaded = load_workflow("-", io.StringIO('{"triggerEvent": "a.b", "steps": []}'))
    assert loaded.present == ["trigger_event", "steps"]
    assert loaded.name == "<stdin>"


def test_unknown_fields_are_named_with_a_suggestion() -> None:
    data = {"name": "x", "steps": [{"type": "webhook", "urll": "u", "retry": {"max_atempts": 1}}]}
    with pytest.raises(UsageError) as caught:
        parse_workflow(json.dumps(data), "wf.json")
    assert str(caught.value).splitlines() == [
        "wf.json: 2 unknown fields",
        "  steps[0].urll: did you mean 'url'?",
        "  steps[0].retry.max_atempts: did you mean 'max_attempts'?",
    ]


def test_headers_map_keys_are_not_field_names() -> None:
    data = {"steps": [{"type": "webhook", "headers": {"X-Anything": "1"}}]}
    workflow, _ = parse_workflow(json.dumps(data), "wf.json")
    assert workflow.steps[0].headers["X-Anything"] == "1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{\n  "name": "x",\n}', "wf.json:3:1: invalid JSON: Expecting property name"),
        ("[1]", "wf.json: expected a JSON object, got list"),
        ('{"steps": [{"duration_ms": "soon"}]}', "wf.json: steps.duration_ms: invalid literal"),
        ('{"steps": {"type": "delay"}}', "wf.json: steps: repeated field steps must be in []"),
    ],
)
def test_malformed_files_are_explained(text: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_workflow(text, "wf.json")
    assert str(caught.value).startswith(message)


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli(["workflows", "create", "-f", str(tmp_path / "nope.json")], cwd=tmp_path)
    assert result.code == 2
    assert result.err == f"error: workflow file not found: {tmp_path / 'nope.json'}\n"


def test_bad_file_is_rejected_before_connecting(tmp_path: Path) -> None:
    stub = FakeStub({})
    result = run_cli(["workflows", "create", "-f", "-"], stub, cwd=tmp_path, stdin='{"nam": 1}')
    assert result.code == 2
    assert "nam: did you mean 'name'?" in result.err
    assert stub.calls == []


def test_masks() -> None:
    assert parse_mask("name, steps") == ["name", "steps"]
    with pytest.raises(UsageError, match="unknown mask path 'status'"):
        parse_mask("name,status")
    with pytest.raises(UsageError, match="--mask is empty"):
        parse_mask(" , ")
    # An empty mask means "replace everything" to the server: never send one.
    with pytest.raises(UsageError, match="nothing to update"):
        update_mask(None, [], "wf.json")


# ------------------------------------------------------------------- errors


def test_error_prints_reason_message_and_violations() -> None:
    error = rpc_error(
        invalid_argument([FieldViolation("steps[2].type", "unsupported step type: email")])
    )
    err = io.StringIO()
    assert print_rpc_error(error, err) == 1
    assert err.getvalue().splitlines() == [
        "error: INVALID_ARGUMENT: steps[2].type: unsupported step type: email",
        "  steps[2].type: unsupported step type: email",
    ]


def test_error_without_details_uses_the_code_name_and_hints() -> None:
    error = rpc_error(EventflowError(grpc.StatusCode.UNAVAILABLE, "", "connection refused"))
    err = io.StringIO()
    print_rpc_error(error, err)
    assert err.getvalue().splitlines() == [
        "error: UNAVAILABLE: connection refused",
        "hint: is the server running? start the dev stack with `make run`",
    ]


def test_unauthenticated_without_a_key_explains_where_keys_come_from(tmp_path: Path) -> None:
    denied = rpc_error(
        EventflowError(grpc.StatusCode.UNAUTHENTICATED, "MISSING_API_KEY", "no credentials")
    )
    result = run_cli(["workflows", "get", "x"], FakeStub({"GetWorkflow": denied}), cwd=tmp_path)
    assert result.code == 1
    assert result.err.startswith("error: MISSING_API_KEY: no credentials\nhint: no API key")


def test_a_real_unreachable_server_gives_unavailable_and_the_hint(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = cli_main.run(
        ["--server", "127.0.0.1:1", "--api-key", KEY, "workflows", "get", "x"],
        connect=open_client,
        env={},
        cwd=tmp_path,
        out=out,
        err=err,
    )
    assert code == 1
    assert err.getvalue().startswith("error: UNAVAILABLE: ")
    assert "make run" in err.getvalue()
    assert KEY not in err.getvalue() + out.getvalue()


# ----------------------------------------------------------------- commands


def test_create_sends_the_file_and_project_and_shows_the_workflow(
    profile_dir: Path, wf_file: Path
) -> None:
    stub = FakeStub(
        {
            "CreateWorkflow": lambda r: ws.CreateWorkflowResponse(
                workflow=stored(name=r.workflow.name)
            )
        }
    )
    result = run_cli(["workflows", "create", "-f", str(wf_file)], stub, cwd=profile_dir)
    assert result.code == 0
    [request] = stub.requests("CreateWorkflow")
    assert request.project_id == "demo"
    assert request.workflow.reentry.cooldown_minutes == 30
    assert "Name:" in result.out and "Welcome email" in result.out
    assert "Created:      2023-11-14 22:13:20 UTC" in result.out


def test_create_without_any_project_leaves_it_to_the_server(tmp_path: Path, wf_file: Path) -> None:
    stub = FakeStub({"CreateWorkflow": ws.CreateWorkflowResponse(workflow=stored())})
    assert run_cli(["workflows", "create", "-f", str(wf_file)], stub, cwd=tmp_path).code == 0
    assert stub.requests("CreateWorkflow")[0].project_id == ""


def test_list_all_follows_every_page_and_prints_one_response(tmp_path: Path) -> None:
    pages = [
        ws.ListWorkflowsResponse(workflows=[stored(id="a")], next_page_token="t1"),
        ws.ListWorkflowsResponse(workflows=[stored(id="b")], next_page_token="t2"),
        ws.ListWorkflowsResponse(workflows=[stored(id="c")]),
    ]
    stub = FakeStub({"ListWorkflows": pages})
    argv = ["workflows", "list", "--all", "--status", "active", "--trigger", "a.b", "-o", "json"]
    result = run_cli(argv, stub, cwd=tmp_path, env={"EVENTFLOW_PROJECT": "shop"})
    assert result.code == 0
    printed = json.loads(result.out)
    assert [w["id"] for w in printed["workflows"]] == ["a", "b", "c"]
    assert "next_page_token" not in printed
    requests = stub.requests("ListWorkflows")
    assert [r.page_token for r in requests] == ["", "t1", "t2"]
    assert {(r.project_id, r.status, r.trigger_event) for r in requests} == {
        ("shop", "active", "a.b")
    }


def test_list_without_all_says_there_is_more(tmp_path: Path) -> None:
    page = ws.ListWorkflowsResponse(workflows=[stored()], next_page_token="tok")
    result = run_cli(
        ["workflows", "list", "--page-size", "1"], FakeStub({"ListWorkflows": page}), cwd=tmp_path
    )
    assert result.code == 0
    assert result.out.splitlines()[1].startswith("wf-1")
    assert "--page-token tok" in result.err


def test_update_defaults_the_mask_to_the_fields_in_the_file(tmp_path: Path) -> None:
    stub = FakeStub({"UpdateWorkflow": ws.UpdateWorkflowResponse(workflow=stored())})
    text = '{"name": "Renamed", "reentry": {"mode": "once"}, "status": "active"}'
    result = run_cli(["workflows", "update", "wf-9", "-f", "-"], stub, cwd=tmp_path, stdin=text)
    assert result.code == 0
    [request] = stub.requests("UpdateWorkflow")
    assert request.workflow.id == "wf-9"
    assert list(request.update_mask.paths) == ["name", "reentry"]


def test_update_with_an_explicit_mask(tmp_path: Path, wf_file: Path) -> None:
    stub = FakeStub({"UpdateWorkflow": ws.UpdateWorkflowResponse(workflow=stored())})
    argv = ["workflows", "update", "wf-1", "-f", str(wf_file), "--mask", "steps"]
    assert run_cli(argv, stub, cwd=tmp_path).code == 0
    assert list(stub.requests("UpdateWorkflow")[0].update_mask.paths) == ["steps"]


def test_publish_unchanged_is_a_success(tmp_path: Path) -> None:
    reply = ws.PublishWorkflowResponse(
        outcome=ws.PUBLISH_OUTCOME_UNCHANGED, version=workflow_pb2.WorkflowVersion(version=2)
    )
    stub = FakeStub({"PublishWorkflow": reply})
    result = run_cli(["workflows", "publish", "wf-1", "-m", "again"], stub, cwd=tmp_path)
    assert (result.code, result.out) == (0, "UNCHANGED: draft equals version 2\n")
    assert stub.requests("PublishWorkflow")[0].message == "again"


def test_version_prints_a_definition_that_is_a_valid_workflow_file(tmp_path: Path) -> None:
    workflow, _ = parse_workflow(json.dumps(WORKFLOW_FILE), "wf.json")
    version = workflow_pb2.WorkflowVersion(workflow_id="wf-1", version=2)
    version.definition.name = workflow.name
    version.definition.steps.extend(workflow.steps)
    stub = FakeStub({"GetWorkflowVersion": ws.GetWorkflowVersionResponse(version=version)})
    result = run_cli(["workflows", "version", "wf-1", "2"], stub, cwd=tmp_path)
    assert result.code == 0
    reparsed, _ = parse_workflow(result.out, "<stdout>")
    assert list(reparsed.steps) == list(workflow.steps)
    assert stub.requests("GetWorkflowVersion")[0].version == 2


def test_toggles_report_the_new_status(tmp_path: Path) -> None:
    stub = FakeStub(
        {"DisableWorkflow": ws.DisableWorkflowResponse(workflow=stored(status="paused"))}
    )
    result = run_cli(["workflows", "disable", "wf-1"], stub, cwd=tmp_path)
    assert result.out == "workflow wf-1 is now paused\n"


def test_server_errors_exit_1(tmp_path: Path) -> None:
    missing = rpc_error(
        EventflowError(grpc.StatusCode.NOT_FOUND, "NOT_FOUND", "workflow 'x' not found")
    )
    result = run_cli(["workflows", "get", "x"], FakeStub({"GetWorkflow": missing}), cwd=tmp_path)
    assert (result.code, result.out) == (1, "")
    assert result.err == "error: NOT_FOUND: workflow 'x' not found\n"


def test_key_secret_is_shown_once_with_a_warning(profile_dir: Path) -> None:
    key = ts.ApiKey(id="efk_abc", organization_id="demo", role="developer")
    stub = FakeStub({"CreateApiKey": ts.CreateApiKeyResponse(api_key=key, secret="efk_abc.s3cr3t")})
    argv = ["admin", "keys", "create", "--role", "developer", "--description", "ci"]
    result = run_cli(argv, stub, cwd=profile_dir)
    assert result.code == 0
    assert "efk_abc.s3cr3t" in result.out
    assert "only time" in result.err
    [request] = stub.requests("CreateApiKey")
    # The profile's project must not narrow a key the user meant to be org-wide.
    assert (request.project_id, request.role, request.description) == ("", "developer", "ci")


def test_key_project_comes_from_an_explicit_flag(tmp_path: Path) -> None:
    stub = FakeStub({"CreateApiKey": ts.CreateApiKeyResponse(api_key=ts.ApiKey(id="k"))})
    argv = ["admin", "keys", "create", "--role", "viewer", "--project", "shop", "--org", "acme"]
    assert run_cli(argv, stub, cwd=tmp_path).code == 0
    assert stub.requests("CreateApiKey")[0].organization_id == "acme"
    assert stub.requests("CreateApiKey")[0].project_id == "shop"


def test_admin_lists_and_org_commands(tmp_path: Path) -> None:
    keys = ts.ListApiKeysResponse(
        api_keys=[ts.ApiKey(id="k1", organization_id="acme", role="admin", revoked=True)]
    )
    org = ts.Organization(id="acme", display_name="Acme", plan="team")
    stub = FakeStub(
        {
            "ListApiKeys": keys,
            "UpdateOrganizationPlan": ts.UpdateOrganizationPlanResponse(organization=org),
        }
    )
    listed = run_cli(["admin", "keys", "list"], stub, cwd=tmp_path)
    assert listed.out.splitlines()[1].split()[:5] == ["k1", "acme", "*", "admin", "revoked"]
    changed = run_cli(["admin", "orgs", "set-plan", "acme", "team"], stub, cwd=tmp_path)
    assert "Plan:     team" in changed.out
    assert stub.requests("UpdateOrganizationPlan")[0].plan == "team"


def test_a_mistyped_option_never_echoes_its_value(capsys: pytest.CaptureFixture[str]) -> None:
    from cli.main import main

    code = main(["actions", "simulate", "x", "--payload", "{}", "--secrets", "K=hunter2"])
    captured = capsys.readouterr()
    assert code == 2
    assert "hunter2" not in captured.err + captured.out
    assert "unrecognized argument" in captured.err


def test_certs_creates_a_ca_and_a_certificate_per_service(tmp_path: Path) -> None:
    from cryptography import x509

    from cli.main import main

    assert main(["certs", "--dir", str(tmp_path / "certs")]) == 0
    ca = x509.load_pem_x509_certificate((tmp_path / "certs" / "ca.pem").read_bytes())
    executor = x509.load_pem_x509_certificate((tmp_path / "certs" / "executor.pem").read_bytes())
    assert executor.issuer == ca.subject
    assert executor.subject.rfc4514_string() == "CN=executor"
    before = (tmp_path / "certs" / "ca.pem").read_bytes()
    assert main(["certs", "--dir", str(tmp_path / "certs")]) == 0
    assert (tmp_path / "certs" / "ca.pem").read_bytes() == before
