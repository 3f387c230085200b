"""Restate: the server of the npm package `@restatedev/restate-server` (its defaults:
single node, local RocksDB and log, fsync on) and a service of the `restate-sdk` Python
SDK behind hypercorn (bench/peers/apps/restate_app.py), registered as a deployment."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from bench.peers import peer

BINARY = "@restatedev/restate-server-linux-x64/bin/restate-server"


def versions() -> dict[str, str]:
    server = peer._run([str(peer.npm_bin(BINARY)), "--version"], timeout=60).strip()
    server = server.removeprefix("restate-server ")
    return {"restate-server": server, "restate-sdk": peer.python_version("restate-sdk")}


def start(bench: peer.Bench, database_url: str, started: list[peer.Process]) -> dict[str, Any]:
    ingress, admin, fabric, service = (peer.free_port() for _ in range(4))
    server = peer.Process.start(
        "restate-server",
        [str(peer.npm_bin(BINARY)), "--no-logo", "--base-dir", str(bench.folder / "restate")],
        bench.folder,
        env={
            "RESTATE_INGRESS__BIND_ADDRESS": f"127.0.0.1:{ingress}",
            "RESTATE_ADMIN__BIND_ADDRESS": f"127.0.0.1:{admin}",
            "RESTATE_BIND_ADDRESS": f"127.0.0.1:{fabric}",
            "RESTATE_LISTEN_MODE": "tcp",
            "RESTATE_NODE_NAME": "bench",
            # No calls home from the benchmark machine (telemetry, version checks).
            "RESTATE_DISABLE_TELEMETRY": "true",
            "RESTATE_LOG_FILTER": "warn",
        },
    )
    started.append(server)
    server.wait_for(lambda: _get(f"http://127.0.0.1:{admin}/health") is not None)
    server.wait_for(lambda: _get(f"http://127.0.0.1:{ingress}/restate/health") is not None)
    config = json.dumps({"database_url": database_url, "listen": f"127.0.0.1:{service}"})
    worker = peer.Process.start(
        "restate-service", [str(peer.python()), "restate_app.py", "worker", config], bench.folder
    )
    started.append(worker)
    worker.wait_for(peer.port_open(service))
    _register(f"http://127.0.0.1:{admin}", f"http://127.0.0.1:{service}")
    return {"ingress": f"http://127.0.0.1:{ingress}", "admin": f"http://127.0.0.1:{admin}"}


def _get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bytes(response.read())
    except OSError:
        return None


def _register(admin: str, service: str) -> None:
    request = urllib.request.Request(
        f"{admin}/deployments",
        data=json.dumps({"uri": service}).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
    except OSError as error:
        raise peer.PeerFailed(
            f"registering the deployment {service} with {admin}: {error}"
        ) from error


PEER = peer.Peer("restate", "restate_app.py", versions, start)
