"""The README's five-minute tour, run verbatim against a fresh `eventflow dev`.

Every ```sh block of the "Five-minute tour" section but the one that starts
the stack is joined into one bash script (`set -euo pipefail`, so any failing
command fails the test) and run in a scratch folder that looks like a
checkout (`.venv` and `examples` link to this one), with the dev stack the
test started on free ports. The README cannot rot without this failing.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from pathlib import Path

from tests.conftest import own_temp_dir
from tests.harness.actions import build_example_actions
from tests.integration.helpers import free_port
from tests.orchestrator.test_crash_recovery import DevProcess, stop_postgres

ROOT = Path(__file__).resolve().parents[2]
TOUR = "## Five-minute tour"
STARTS_THE_STACK = "make run"


def tour_blocks(readme: str) -> list[str]:
    section = readme.split(TOUR, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    return [b for b in blocks if b.strip() != STARTS_THE_STACK]


def test_the_tour_has_the_steps_the_issue_promises() -> None:
    script = "\n".join(tour_blocks((ROOT / "README.md").read_text()))
    for command in (
        "actions upload",
        "actions review",
        "workflows create",
        "workflows publish",
        "secrets set",
        "events publish",
        "events reactions",
        "dlq redrive",
        "projections get",
        "events replay",
    ):
        assert f"eventflow {command}" in script, command


async def test_the_readme_tour_runs_verbatim() -> None:
    build_example_actions()  # the tour's `make -C examples actions` then has nothing to do
    script = "\n".join(["set -euo pipefail", *tour_blocks((ROOT / "README.md").read_text())])
    with own_temp_dir("tour") as home:
        for name in (".venv", "examples"):
            (home / name).symlink_to(ROOT / name)
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTFLOW_")}
        env.update(
            EVENTFLOW_GRPC_LISTEN=f"127.0.0.1:{free_port()}",
            EVENTFLOW_INTERNAL_LISTEN=f"127.0.0.1:{free_port()}",
        )
        dev = DevProcess(env, cwd=home)
        try:
            await dev.start()
            tour = await asyncio.to_thread(
                subprocess.run,
                ["bash", "-c", script],
                cwd=home,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
        finally:
            if dev.process:
                await dev.interrupt()
            stop_postgres(home / ".eventflow" / "pg")
            dev.reap_children()
    output = tour.stdout + tour.stderr
    assert tour.returncode == 0, f"the tour failed:\n{output[-6000:]}"
    assert "REJECTED" in output  # the typo'd threshold failed the step
    assert "order_risk" in output and "o-1" in output  # the projection was read
    assert output.count("replay") >= 2  # the replay ran and its write is marked
