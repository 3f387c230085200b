"""Where the CLI's connection settings come from.

Each setting is resolved on its own: command-line flag, then environment
variable, then the dev profile that `make run` writes, then a default. The
profile is found by walking up from the working directory so that every
command run anywhere inside a checkout talks to that checkout's dev stack
without any flags.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_SERVER = "127.0.0.1:7233"
PROFILE_PATH = Path(".eventflow") / "credentials.json"


@dataclass(frozen=True)
class Profile:
    """The dev stack's credentials file; every field may be missing."""

    path: Path | None = None
    values: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    server: str
    api_key: str
    project: str
    output: str

    def __repr__(self) -> str:
        # Settings end up in tracebacks and debug prints: keep the key out.
        key = "<set>" if self.api_key else "<none>"
        return (
            f"Settings(server={self.server!r}, api_key={key}, "
            f"project={self.project!r}, output={self.output!r})"
        )


def find_profile(start: Path) -> Path | None:
    """The nearest credentials file at or above ``start``."""
    for directory in (start, *start.parents):
        candidate = directory / PROFILE_PATH
        if candidate.is_file():
            return candidate
    return None


def load_profile(start: Path | None = None) -> Profile:
    """Read the nearest profile; a broken one is reported and ignored.

    A stale or half-written profile must not block a command that has every
    setting on its command line, so this warns instead of failing.
    """
    path = find_profile(start or Path.cwd())
    if path is None:
        return Profile()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"warning: ignoring {path}: {exc}", file=sys.stderr)
        return Profile()
    if not isinstance(data, dict):
        print(f"warning: ignoring {path}: expected a JSON object", file=sys.stderr)
        return Profile()
    values = {k: v for k, v in data.items() if isinstance(v, str) and v}
    return Profile(path, values)


def resolve(
    *,
    server: str | None,
    api_key: str | None,
    project: str | None,
    output: str | None,
    env: Mapping[str, str] | None = None,
    profile: Profile | None = None,
) -> Settings:
    """Combine flags (None when not given), environment and profile."""
    env = os.environ if env is None else env
    prof = profile.values if profile else {}
    chosen_server = server if server is not None else env.get("EVENTFLOW_SERVER")
    if chosen_server and prof and chosen_server != prof.get("server"):
        # The dev profile's key belongs to the dev server: never send it elsewhere.
        prof = {}

    def pick(flag: str | None, env_name: str, key: str, default: str) -> str:
        if flag is not None:
            return flag
        return env.get(env_name) or prof.get(key) or default

    return Settings(
        server=pick(server, "EVENTFLOW_SERVER", "server", DEFAULT_SERVER),
        api_key=pick(api_key, "EVENTFLOW_API_KEY", "api_key", ""),
        project=pick(project, "EVENTFLOW_PROJECT", "project", ""),
        output=output or "table",
    )
