"""Builds the client check programs in tests/clients/{go,ts} against the generated clients.

Go: `go build` of tests/clients/go, whose go.mod points at clients/go by a replace directive.
TypeScript: the program's sources and the generated clients/ts (as gen/) are put together in a
build folder beside a node_modules from the program's own lock file, as an application that
vendors generated code would have them, and compiled with its pinned tsc.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.harness import go_tools, npm_tools
from tests.harness.clients import TS_OUT
from tests.harness.toolcache import run

HERE = Path(__file__).resolve().parent
GO_PROGRAM = HERE / "go"
TS_PROGRAM = HERE / "ts"


def build_go(out_dir: Path) -> list[str]:
    """The command that runs the Go program."""
    binary = out_dir / "clientcheck"
    run([go_tools.go(), "build", "-o", binary, "."], cwd=GO_PROGRAM, env=go_tools.go_env())
    return [str(binary)]


def build_ts(out_dir: Path) -> list[str]:
    """The command that runs the TypeScript program."""
    node_modules = npm_tools.install(TS_PROGRAM)
    for source in [*TS_PROGRAM.glob("*.ts"), TS_PROGRAM / "tsconfig.json"]:
        shutil.copy2(source, out_dir)
    shutil.copytree(TS_OUT, out_dir / "gen")
    (out_dir / "node_modules").symlink_to(node_modules, target_is_directory=True)
    run([node_modules / ".bin" / "tsc", "-p", out_dir], cwd=out_dir)
    node = shutil.which("node")
    assert node is not None, "node is not on PATH"
    return [node, str(out_dir / "dist" / "main.js")]
