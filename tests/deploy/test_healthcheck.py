"""deploy/healthcheck.py, the compose health check, against a real eventflow gRPC server."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator

import pytest

from libs.server import RunningServer, start_server
from tests.deploy.files import DEPLOY

SCRIPT = DEPLOY / "healthcheck.py"


class NoKeys:
    async def find_key(self, key_id: str) -> None:
        return None


@pytest.fixture
async def server() -> AsyncIterator[RunningServer]:
    running = await start_server([], listen="127.0.0.1:0", keys=NoKeys())
    yield running
    await running.stop(0)


async def healthcheck(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SCRIPT),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode().strip()


async def test_a_serving_server_is_healthy(server: RunningServer) -> None:
    assert await healthcheck(f"127.0.0.1:{server.port}") == (0, "SERVING")


async def test_a_server_shutting_down_is_unhealthy(server: RunningServer) -> None:
    await server.health.enter_graceful_shutdown()
    assert await healthcheck(f"127.0.0.1:{server.port}") == (1, "NOT_SERVING")


async def test_an_unknown_service_is_unhealthy(server: RunningServer) -> None:
    address = f"127.0.0.1:{server.port}"
    assert await healthcheck(address, "eventflow.nothing.v1.Nothing") == (1, "NOT_FOUND")


async def test_nothing_listening_is_unhealthy() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # A port just freed, which nothing listens on: connections are refused.
    assert await healthcheck(f"127.0.0.1:{port}") == (1, "UNAVAILABLE")


async def test_no_address_is_a_usage_error() -> None:
    code, _ = await healthcheck()
    assert code == 2
