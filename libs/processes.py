"""Whether a process still runs (crash recovery on the same host)."""

from __future__ import annotations

import os


def pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True
