"""eventflow's stack in a process of its own, for the side-by-side benchmark.

All five services in one process (as `eventflow dev` runs them) on the PostgreSQL and
Kafka broker named by the usual EVENTFLOW_* variables, with every other setting at its
default; the executor's guests run in its worker processes. Prints the gRPC address as one
JSON line once it serves, then runs until SIGTERM. A process of its own so that the
benchmark's load generator does not share its event loop, and its memory can be read.
"""

from __future__ import annotations

import asyncio
import json
import signal

from cli.stack import Stack
from libs.config import Settings


async def serve() -> None:
    stack = await Stack.start(Settings.load())
    try:
        print(json.dumps({"address": stack.address}), flush=True)
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopping.set)
        await stopping.wait()
    finally:
        await stack.stop()


if __name__ == "__main__":
    asyncio.run(serve())
