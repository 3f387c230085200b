"""The Go protoc plugins, pinned, installed with `go install` from the Go module proxy.

Each plugin version gets its own folder under ~/.cache/eventflow/go-bin, so changing a pin
installs the new one beside the old instead of trusting whatever binary is there. Go's own
module and build caches stay where the go command keeps them (~/go/pkg/mod, ~/.cache/go-build).

CLI: ``python -m tests.harness.go_tools`` installs the plugins and prints their folders.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.harness.toolcache import CACHE_ROOT, ToolError, file_lock, run

GO_BIN = CACHE_ROOT / "go-bin"

# Plugin name -> the module path of its main package, and its pinned version.
PLUGINS = {
    "protoc-gen-go": ("google.golang.org/protobuf/cmd/protoc-gen-go", "v1.36.12"),
    "protoc-gen-go-grpc": ("google.golang.org/grpc/cmd/protoc-gen-go-grpc", "v1.6.2"),
}


def go_env() -> dict[str, str]:
    """The environment for go commands: never fetch a toolchain, never stamp VCS info."""
    env = dict(os.environ)
    env["GOTOOLCHAIN"] = "local"
    env.setdefault("GOFLAGS", "-buildvcs=false")
    return env


def go() -> str:
    found = shutil.which("go")
    if found is None:
        raise ToolError("the go command is not on PATH (Go 1.24 or newer is needed)")
    return found


def install_plugins() -> list[Path]:
    """Install any missing pinned plugin; the folders to put on PATH."""
    folders = []
    for name, (package, version) in PLUGINS.items():
        folder = GO_BIN / f"{name}@{version}"
        if not (folder / name).is_file():
            with file_lock(GO_BIN / f".{name}.lock"):
                if not (folder / name).is_file():
                    env = go_env() | {"GOBIN": str(folder)}
                    run([go(), "install", f"{package}@{version}"], env=env)
        folders.append(folder)
    return folders


if __name__ == "__main__":
    for folder in install_plugins():
        print(folder)
