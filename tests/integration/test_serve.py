"""Production mode: `eventflow serve registry --config FILE` against external
PostgreSQL and Kafka, as the container images run it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
from eventflow.registry.v1 import tenancy_service_pb2 as tn
from eventflow.registry.v1 import tenancy_service_pb2_grpc as tn_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.conftest import bearer, create_database
from tests.integration.helpers import free_port

REPO = Path(__file__).resolve().parents[2]


def serve(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", *args],
        cwd=REPO,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_serving(address: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()[0]
            try:
                reply = health.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                time.sleep(0.2)
    raise AssertionError("registry did not become healthy")


def test_serve_registry_from_a_config_file_on_kafka(
    tmp_path: Path, postgres_server: str, kafka_bootstrap: str
) -> None:
    port = free_port()
    config = tmp_path / "registry.toml"
    config.write_text(
        f'database_url = "{create_database(postgres_server)}"\n'
        'bus = "kafka"\n'
        f'kafka_bootstrap = "{kafka_bootstrap}"\n'
        'grpc_listen = "127.0.0.1:1"\n'  # overridden by the environment below
        'operator_token = "operator-secret-for-test"\n'
    )
    process = serve(
        "registry", "--config", str(config), env={"EVENTFLOW_GRPC_LISTEN": f"127.0.0.1:{port}"}
    )
    try:
        wait_serving(f"127.0.0.1:{port}", process)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            created = tn_grpc.TenancyServiceStub(channel).CreateOrganization(
                tn.CreateOrganizationRequest(organization=tn.Organization(id="prod-org")),
                metadata=bearer("operator-secret-for-test"),
                timeout=10,
            )
        assert created.organization.plan == "starter"
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    assert "operator-secret-for-test" not in output


def test_serve_refuses_to_start_without_a_database(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "serve", "registry"],
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k != "EVENTFLOW_DATABASE_URL"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "EVENTFLOW_DATABASE_URL" in done.stdout + done.stderr


def test_serve_names_the_services_it_knows(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "serve", "billing"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "registry" in done.stdout + done.stderr
