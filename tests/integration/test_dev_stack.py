"""`make run`'s stack end to end: the real `eventflow dev` process driven by the real CLI.

The CLI runs from the stack's folder with no flags, finding the saved
credentials the way a developer's shell would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import own_temp_dir
from tests.integration.helpers import free_port

WORKFLOW = {
    "name": "Welcome",
    "trigger_event": "user.signed_up",
    "steps": [
        {"type": "custom_action", "action": "score-user"},
        {"type": "webhook", "url": "https://hooks.example.com/welcome"},
    ],
}


class DevStack:
    def __init__(self, home: Path, port: int) -> None:
        self.home = home
        self.port = port
        self.env = {
            **os.environ,
            "EVENTFLOW_DATA_DIR": str(home / ".eventflow"),
            "EVENTFLOW_GRPC_LISTEN": f"127.0.0.1:{port}",
        }
        for name in ("EVENTFLOW_API_KEY", "EVENTFLOW_SERVER", "EVENTFLOW_PROJECT"):
            self.env.pop(name, None)
        self.process: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "dev"],
            cwd=Path(__file__).resolve().parents[2],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + 90
        for line in self.process.stdout:
            self.output.append(line)
            if "Ctrl-C stops it" in line:
                return
            assert time.monotonic() < deadline, "".join(self.output)
        raise AssertionError("dev stack exited:\n" + "".join(self.output))

    def interrupt(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)
        rest, _ = self.process.communicate(timeout=30)
        self.output.append(rest)
        return self.process.returncode

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cli.main", *args],
            cwd=self.home,
            env={**self.env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def cli_json(self, *args: str) -> dict:
        done = self.cli("--output", "json", *args)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture
def dev() -> Iterator[DevStack]:
    with own_temp_dir("dev") as home:
        stack = DevStack(home, free_port())
        stack.start()
        yield stack
        if stack.process and stack.process.poll() is None:
            # Ctrl-C, not SIGKILL: the stack must stop its embedded PostgreSQL on the way out.
            stack.interrupt()


def test_dev_stack_serves_the_cli_and_keeps_data_across_restarts(dev: DevStack) -> None:
    banner = "".join(dev.output)
    assert f"127.0.0.1:{dev.port}" in banner and "efk_" in banner
    credentials = json.loads((dev.home / ".eventflow" / "credentials.json").read_text())
    assert oct((dev.home / ".eventflow" / "credentials.json").stat().st_mode & 0o777) == "0o600"

    (dev.home / "wf.json").write_text(json.dumps(WORKFLOW))
    created = dev.cli_json("workflows", "create", "-f", "wf.json")
    assert created["status"] == "draft"
    first = dev.cli("workflows", "publish", created["id"], "-m", "first")
    assert first.returncode == 0 and "published version 1" in first.stdout, first
    again = dev.cli("workflows", "publish", created["id"])
    assert again.returncode == 0 and "UNCHANGED" in again.stdout, again
    disabled = dev.cli_json("workflows", "disable", created["id"])
    assert disabled["status"] == "paused"

    listed = dev.cli("workflows", "list")
    assert listed.returncode == 0
    row = next(line for line in listed.stdout.splitlines() if created["id"] in line)
    assert "paused" in row and "Welcome" in row
    assert "demo.user_signed_up" in listed.stdout  # the demo workflow `make run` publishes

    bad = dev.cli(
        "workflows",
        "create",
        "-f",
        "-",
        stdin='{"name": "x", "trigger_event": "a", "steps": [{"type": "email"}]}',
    )
    assert bad.returncode == 1
    assert "steps[0].type" in bad.stderr and "unsupported step type: email" in bad.stderr

    # The demo workflow reacts to the demo event (a durable 2 s delay).
    published = dev.cli(
        "events", "publish", "--type", "demo.user_signed_up", "--data", '{"userId": "u-1"}'
    )
    assert published.returncode == 0, published.stderr
    event_id = published.stdout.strip()
    deadline = time.monotonic() + 30
    while True:
        reactions = dev.cli_json("events", "reactions", event_id).get("reactions", [])
        if reactions and reactions[0]["instance_status"] == "completed":
            break
        assert time.monotonic() < deadline, reactions
        time.sleep(0.3)
    assert reactions[0]["steps"][0]["status"] == "completed"

    assert dev.interrupt() == 0
    dev.start()
    after = dev.cli_json("workflows", "get", created["id"])
    assert after["status"] == "paused" and after["published_version"] == 1
    assert (
        json.loads((dev.home / ".eventflow" / "credentials.json").read_text())["api_key"]
        == (credentials["api_key"])
    )
    assert credentials["api_key"] not in dev.cli("workflows", "list").stdout

    assert dev.interrupt() == 0
    assert not postgres_running(dev.home / ".eventflow" / "pg")

    telemetry = (dev.home / ".eventflow" / "telemetry.log").read_text()
    assert "/eventflow.registry.v1.WorkflowService/PublishWorkflow" in telemetry
    assert credentials["api_key"] not in telemetry
    assert credentials["api_key"].split("_", 2)[2] not in telemetry


def postgres_running(pgdata: Path) -> bool:
    """Whether a postmaster still serves this data directory."""
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text().split()[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
