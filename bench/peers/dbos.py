"""DBOS: the `dbos` library in a worker process (bench/peers/apps/dbos_app.py), its system
database on the benchmark's PostgreSQL, beside the rows it writes."""

from __future__ import annotations

import json
from typing import Any

from bench.peers import peer


def versions() -> dict[str, str]:
    return {"dbos": peer.python_version("dbos")}


def start(bench: peer.Bench, database_url: str, started: list[peer.Process]) -> dict[str, Any]:
    config = json.dumps({"database_url": database_url})
    worker = peer.Process.start(
        "dbos-worker", [str(peer.python()), "dbos_app.py", "worker", config], bench.folder
    )
    started.append(worker)
    worker.wait_for_line("bench worker ready")
    return {}


PEER = peer.Peer("dbos", "dbos_app.py", versions, start)
