"""eventflow's stack in processes of its own, for the side-by-side benchmark.

Production shape: this process serves registry, governance, vault and the executor (whose
guests run in its worker processes) and starts ``EVENTFLOW_BENCH_ORCHESTRATORS``
orchestrator replicas as child processes, which share ingest by Kafka partition and
instances through the database (SKIP LOCKED), as replicas in a cluster do. The default is
one: a process per core on the 2-core benchmark machine. Two replicas there measured worse
on both figures (514 runs/s and p99 119 ms against 526 and 52 ms): three busy processes,
twice the consumers and their group rebalances share two cores.
``EVENTFLOW_BENCH_ORCHESTRATORS=0`` runs all five services in this one process, as
`eventflow dev` does. Settings come from the usual EVENTFLOW_* variables, every other one at
its default. Prints the public gRPC address as one JSON line once everything serves, then
runs until SIGTERM. A process tree of its own so that the load generator does not share its
event loop, and its memory can be read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys

from cli.stack import SERVICES, Stack
from libs import runtime
from libs.config import Settings

REPLICAS_ENV = "EVENTFLOW_BENCH_ORCHESTRATORS"
REPLICA_FLAG = "--orchestrator-replica"
READY_TIMEOUT_S = 60


async def serve() -> None:
    replicas = int(os.environ.get(REPLICAS_ENV, "1"))
    platform = tuple(s for s in SERVICES if s != "orchestrator") if replicas else SERVICES
    stack = await Stack.start(Settings.load(), services=platform)
    children: list[asyncio.subprocess.Process] = []
    try:
        for _ in range(replicas):
            children.append(await _replica(stack.internal_address))
        runtime.settle_heap()
        print(json.dumps({"address": stack.address}), flush=True)
        await _until_stopped()
    finally:
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGTERM)
        for child in children:
            await child.wait()
        await stack.stop()


async def _replica(platform: str) -> asyncio.subprocess.Process:
    """An orchestrator in a process of its own, calling the platform's services."""
    env = {
        **os.environ,
        "EVENTFLOW_REGISTRY_ADDRESS": platform,
        "EVENTFLOW_EXECUTOR_ADDRESS": platform,
        "EVENTFLOW_GOVERNANCE_ADDRESS": platform,
        "EVENTFLOW_VAULT_ADDRESS": platform,
    }
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.eventflow_server", REPLICA_FLAG,
        env=env, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), READY_TIMEOUT_S)
    if not line.startswith(b'{"address"'):
        raise RuntimeError(f"an orchestrator replica did not start (exit {child.returncode})")
    return child


async def serve_replica() -> None:
    stack = await Stack.start(Settings.load(), services=("orchestrator",))
    try:
        runtime.settle_heap()
        print(json.dumps({"address": stack.address}), flush=True)
        await _until_stopped()
    finally:
        await stack.stop()


async def _until_stopped() -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    await stopping.wait()


if __name__ == "__main__":
    runtime.run(serve_replica() if REPLICA_FLAG in sys.argv else serve())
