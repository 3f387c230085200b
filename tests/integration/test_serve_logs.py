"""`eventflow serve` logs JSON lines by default (collectors parse them), and
text when EVENTFLOW_LOG_FORMAT says so."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.conftest import create_database
from tests.integration.helpers import free_port
from tests.integration.test_serve import serve, wait_serving


def run_registry(tmp_path: Path, postgres_server: str, kafka_bootstrap: str, **env: str) -> str:
    """Start `eventflow serve registry`, stop it with SIGTERM; its whole output."""
    port = free_port()
    config = tmp_path / "registry.toml"
    config.write_text(
        f'database_url = "{create_database(postgres_server)}"\n'
        'bus = "kafka"\n'
        f'kafka_bootstrap = "{kafka_bootstrap}"\n'
        f'grpc_listen = "127.0.0.1:{port}"\n'
    )
    process = serve("registry", "--config", str(config), env=env)
    try:
        wait_serving(f"127.0.0.1:{port}", process)
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    return output


def test_serve_writes_one_json_object_per_line(
    tmp_path: Path, postgres_server: str, kafka_bootstrap: str
) -> None:
    output = run_registry(tmp_path, postgres_server, kafka_bootstrap)
    lines = [json.loads(line) for line in output.splitlines() if line.strip()]
    messages = [line["message"] for line in lines]
    assert any(m.startswith("serving on 127.0.0.1:") for m in messages), messages
    assert "stopping" in messages
    for line in lines:
        assert line["service"] == "eventflow-registry"
        assert {"time", "level", "logger"} <= set(line)


def test_serve_writes_text_when_asked(
    tmp_path: Path, postgres_server: str, kafka_bootstrap: str
) -> None:
    output = run_registry(tmp_path, postgres_server, kafka_bootstrap, EVENTFLOW_LOG_FORMAT="text")
    assert " INFO eventflow serving on 127.0.0.1:" in output
    assert not output.lstrip().startswith("{")
