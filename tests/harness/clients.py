"""Generates the Go and TypeScript clients from protos/ (`make clients`).

`buf generate` with clients/buf.gen.yaml, its plugins installed at pinned versions first:
the Go ones by go_tools, buf and ts-proto by npm_tools from clients/package-lock.json.
Output goes to clients/go (a Go module whose go.mod is committed) and clients/ts; neither
generated tree is committed, and both are rebuilt from scratch so a deleted proto leaves
nothing stale behind.

CLI: ``python -m tests.harness.clients``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from tests.harness import go_tools, npm_tools
from tests.harness.toolcache import run

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = ROOT / "clients"
GO_OUT = CLIENTS / "go"
TS_OUT = CLIENTS / "ts"
# What buf writes under clients/go: everything but the committed go.mod and go.sum.
GO_GENERATED = ("eventflow",)


@dataclass(frozen=True)
class Generated:
    go_module: Path
    ts_sources: Path


def buf() -> Path:
    """The pinned buf CLI (installed on first use)."""
    return npm_tools.install(CLIENTS) / ".bin" / "buf"


def generate() -> Generated:
    plugin_dirs = [*go_tools.install_plugins(), npm_tools.install(CLIENTS) / ".bin"]
    for name in GO_GENERATED:
        shutil.rmtree(GO_OUT / name, ignore_errors=True)
    shutil.rmtree(TS_OUT, ignore_errors=True)
    path = os.pathsep.join([*(str(d) for d in plugin_dirs), os.environ.get("PATH", "")])
    run(
        [buf(), "generate", "--template", CLIENTS / "buf.gen.yaml"],
        cwd=ROOT,
        env=os.environ | {"PATH": path},
    )
    return Generated(GO_OUT, TS_OUT)


if __name__ == "__main__":
    generated = generate()
    go_files = sum(1 for _ in generated.go_module.rglob("*.go"))
    ts_files = sum(1 for _ in generated.ts_sources.rglob("*.ts"))
    print(f"generated {go_files} Go files into {generated.go_module.relative_to(ROOT)}")
    print(f"generated {ts_files} TypeScript files into {generated.ts_sources.relative_to(ROOT)}")
