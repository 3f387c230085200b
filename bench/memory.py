"""Peak memory of a system's processes while it is measured.

Sampled from /proc as PSS (proportional set size): shared pages are split among the
processes that map them, so PostgreSQL's shared buffers count once for all its backends,
and summing a process tree gives its real footprint. Linux only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path

INTERVAL_S = 1.0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(c) for c in task.read_text().split()]
        except OSError:
            continue
    return found


def tree(pid: int) -> list[int]:
    """``pid`` and every live descendant."""
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        todo += _children(current)
    return pids


def pss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def tree_pss(roots: Iterable[int]) -> int:
    return sum(pss_bytes(p) for root in roots for p in tree(root))


class PeakMemory:
    """Samples groups of process trees in a thread; ``peaks()`` is the largest sum per group.

    ``groups`` maps a name to a function returning the group's root pids now (a system's
    processes can start after sampling does).
    """

    def __init__(self, groups: dict[str, Callable[[], list[int]]]) -> None:
        self.groups = groups
        self._peak = dict.fromkeys(groups, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-memory", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, roots in self.groups.items():
                self._peak[name] = max(self._peak[name], tree_pss(roots()))
            self._stop.wait(INTERVAL_S)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def peaks_mb(self) -> dict[str, float]:
        return {name: value / 2**20 for name, value in self._peak.items()}
