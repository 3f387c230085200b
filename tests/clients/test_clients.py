"""The generated Go and TypeScript clients, proven against a running stack (SPEC §11).

Each program (tests/clients/go, tests/clients/ts) is built against the clients `make clients`
generates, then run as a separate process against the session stack's public gRPC port: it
creates a tenant, uploads and approves an action that writes a keyed projection, publishes a
workflow running it, publishes an event, and reads the instance and the projection back. The
programs run as subprocesses awaited on the event loop, which the in-process stack shares.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cli.stack import Stack
from tests.clients import programs
from tests.governance.modules import constant, wasm
from tests.harness import clients

RUN_TIMEOUT_S = 150
BUILDERS = {"go": programs.build_go, "ts": programs.build_ts}


@pytest.fixture(scope="module")
async def generated() -> clients.Generated:
    return await asyncio.to_thread(clients.generate)


@pytest.fixture(scope="module", params=sorted(BUILDERS))
async def program(
    request: pytest.FixtureRequest,
    generated: clients.Generated,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[str, list[str]]:
    """(language, command) of a built client check program."""
    language: str = request.param
    out_dir = tmp_path_factory.mktemp(f"client-{language}")
    return language, await asyncio.to_thread(BUILDERS[language], out_dir)


async def run_program(
    command: list[str], stack: Stack, operator_token: str, *args: str
) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *command,
        "--address",
        stack.address,
        *args,
        env=os.environ | {"EVENTFLOW_OPERATOR_TOKEN": operator_token},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def projector(tmp_path: Path, key: dict[str, str], data: dict[str, Any]) -> Path:
    """A module whose output writes one keyed projection row."""
    path = tmp_path / "projector.wasm"
    output = {"ok": True, "projection": {**key, "status": "recorded", "data": data}}
    path.write_bytes(wasm(constant(output)))
    return path


async def stored_projection(database_url: str, organization: str) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT name, entity_type, entity_id, status, data FROM orchestrator.projections"
            " WHERE organization_id = %s",
            (organization,),
        )
        return list(await cur.fetchall())


async def test_a_generated_client_runs_a_workflow_and_reads_its_projection(
    program: tuple[str, list[str]],
    stack: Stack,
    operator_token: str,
    database_url: str,
    tmp_path: Path,
) -> None:
    language, command = program
    key = {"name": "client_checks", "entity_type": "check", "entity_id": uuid.uuid4().hex[:12]}
    data = {"client": language, "n": secrets.randbelow(10**6), "nested": {"ok": True}}
    module = projector(tmp_path, key, data)

    code, out, err = await run_program(
        command,
        stack,
        operator_token,
        "--wasm",
        str(module),
        "--projection",
        key["name"],
        "--entity-type",
        key["entity_type"],
        "--entity-id",
        key["entity_id"],
    )

    assert code == 0, f"{language} client check failed:\n{err}"
    summary = json.loads(out)
    assert summary["client"] == language
    assert summary["action"]["review_status"] == "approved"
    assert summary["workflow_version"] == 1
    assert summary["instance"] == {
        "id": summary["instance"]["id"],
        "status": "completed",
        "workflow_id": summary["workflow_id"],
        "event_id": summary["event_id"],
    }
    projection = summary["projection"]
    assert {k: projection[k] for k in ("name", "entity_type", "entity_id")} == key
    assert (projection["status"], projection["data"]) == ("recorded", data)
    # Probe events run the same workflow, so the last writer is one of the program's events.
    assert projection["last_event_id"] in summary["published_event_ids"]
    assert projection["last_instance_id"]
    # What the program read over gRPC is what the orchestrator stored.
    assert await stored_projection(database_url, summary["organization"]) == [
        (key["name"], key["entity_type"], key["entity_id"], "recorded", data)
    ]


async def test_a_failed_call_exits_nonzero_with_its_code_and_reason(
    program: tuple[str, list[str]], stack: Stack, operator_token: str, tmp_path: Path
) -> None:
    language, command = program
    wrong_token = secrets.token_urlsafe(24)
    module = projector(tmp_path, {"name": "x", "entity_type": "x", "entity_id": "x"}, {})

    code, out, err = await run_program(
        command, stack, wrong_token, "--wasm", str(module), "--projection", "x"
    )

    assert code == 1, f"{language}: exit {code}\n{out}\n{err}"
    assert out == ""
    assert "error: create organization: UNAUTHENTICATED INVALID_API_KEY:" in err
    assert wrong_token not in err and operator_token not in err
