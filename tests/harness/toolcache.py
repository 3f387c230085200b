"""Where installed tools live (~/.cache/eventflow), and how installs and tool runs report failure.

Installs land outside the repo, so a clean clone fetches them once and every later run reuses
them; a file lock makes parallel test processes wait for one install instead of racing it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

CACHE_ROOT = Path(os.environ.get("EVENTFLOW_TOOL_CACHE") or Path.home() / ".cache" / "eventflow")


class ToolError(RuntimeError):
    """A tool install or run failed; the message carries the command and its output."""


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run(
    args: Sequence[str | Path],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 600,
) -> str:
    """Run a command to completion; its stdout, or a ToolError with everything it printed."""
    proc = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        raise ToolError(
            f"`{' '.join(str(a) for a in args)}` exited {proc.returncode}"
            f"\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )
    return proc.stdout
