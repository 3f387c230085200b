"""The servers' runtime: uvloop for the event loop, start-up objects frozen out of the GC."""

from __future__ import annotations

import asyncio
import gc

from libs import runtime


def test_run_drives_the_coroutine_on_uvloop_and_returns_its_result() -> None:
    async def main() -> str:
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__module__

    assert runtime.run(main()).startswith("uvloop")
    assert runtime.run(asyncio.sleep(0, result=7)) == 7


def test_settle_heap_freezes_what_exists_and_keeps_collecting_what_comes_after() -> None:
    gc.unfreeze()
    try:
        runtime.settle_heap()
        assert gc.get_freeze_count() > 0

        class Cycle:
            def __init__(self) -> None:
                self.me = self

        before = gc.get_freeze_count()
        Cycle()  # garbage after start-up is still collected, never frozen
        assert gc.collect() >= 1
        assert gc.get_freeze_count() == before
    finally:
        gc.unfreeze()
