"""The example producers and webhook receiver, built for tests outside the repo.

``go_producer()`` runs ``go build`` on examples/producers/go (modules from the Go module proxy,
checked against the committed go.sum) and ``node_receiver()`` runs ``npm ci`` on a copy of
examples/receivers/node (the committed package-lock.json). Each result lands in a folder under
~/.cache/eventflow/examples named by the hash of the example's files, so an edit builds anew
and an unchanged example is reused without asking any registry. A file lock makes parallel
test processes wait for one build instead of racing it.

CLI: ``python -m tests.harness.example_programs`` builds both and prints where they are.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GO_PRODUCER = ROOT / "examples" / "producers" / "go"
PYTHON_PRODUCER = ROOT / "examples" / "producers" / "python" / "produce.py"
NODE_RECEIVER = ROOT / "examples" / "receivers" / "node"
CACHE_DIR = (
    Path(os.environ.get("EVENTFLOW_TOOL_CACHE") or Path.home() / ".cache" / "eventflow")
    / "examples"
)
NODE_FILES = ("package.json", "package-lock.json", "receiver.mjs")
MARKER = ".built"
BUILD_TIMEOUT_S = 600


class ExampleBuildError(RuntimeError):
    """A build or install failed; the message carries the command and all it printed."""


def go_producer() -> Path:
    """The built Go producer (``produce``); it takes the flags its main.go documents."""
    sources = [GO_PRODUCER / name for name in ("go.mod", "go.sum", "main.go")]
    folder = _cached("go-producer", sources, _build_go)
    return folder / "produce"


def node_receiver() -> Path:
    """A folder holding receiver.mjs with its node_modules installed: ``node receiver.mjs``."""
    sources = [NODE_RECEIVER / name for name in NODE_FILES]
    return _cached("node-receiver", sources, _install_node)


def _build_go(folder: Path) -> None:
    go = _tool("go", "Go 1.24 or newer")
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=readonly -buildvcs=false")
    _run([go, "build", "-o", str(folder / "produce"), "."], cwd=GO_PRODUCER, env=env)


def _install_node(folder: Path) -> None:
    npm = _tool("npm", "Node.js 18 or newer")
    # The script sits beside its node_modules: Node resolves imports from the script's folder.
    for name in NODE_FILES:
        shutil.copy2(NODE_RECEIVER / name, folder / name)
    _run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=folder)


def _cached(name: str, sources: Sequence[Path], build: Callable[[Path], None]) -> Path:
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    folder = CACHE_DIR / f"{name}-{digest.hexdigest()[:16]}"
    if (folder / MARKER).is_file():
        return folder
    with _file_lock(CACHE_DIR / f".{name}.lock"):
        if not (folder / MARKER).is_file():
            # A half-finished earlier build must never pass for a finished one.
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            build(folder)
            (folder / MARKER).touch()
    return folder


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _tool(name: str, needs: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise ExampleBuildError(f"`{name}` is not on PATH ({needs} is needed)")
    return found


def _run(args: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
    )
    if proc.returncode != 0:
        raise ExampleBuildError(
            f"`{' '.join(args)}` in {cwd} exited {proc.returncode}"
            f"\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )


if __name__ == "__main__":
    print(go_producer())
    print(node_receiver())
