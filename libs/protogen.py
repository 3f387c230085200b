"""Generate the Python gRPC stubs for every proto under a source root.

Run as ``python -m libs.protogen protos libs/gen``. The output is a clean
package tree (``eventflow.<service>.v1``) with type stubs, rebuilt from
scratch each time so a deleted proto leaves nothing stale behind.
"""

from __future__ import annotations

import shutil
import sys
from importlib import resources
from pathlib import Path

from grpc_tools import protoc


def generate(source_root: Path, out_dir: Path) -> list[Path]:
    protos = sorted(source_root.rglob("*.proto"))
    if not protos:
        raise SystemExit(f"no .proto files under {source_root}")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    well_known = resources.files("grpc_tools") / "_proto"
    args = [
        "protoc",
        f"-I{source_root}",
        f"-I{well_known}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *(str(p) for p in protos),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for package in {p.parent for p in out_dir.rglob("*.py")}:
        while package != out_dir:
            (package / "__init__.py").touch()
            package = package.parent
    return protos


def main() -> None:
    source_root, out_dir = (Path(a) for a in sys.argv[1:3])
    protos = generate(source_root, out_dir)
    print(f"generated stubs for {len(protos)} protos into {out_dir}")


if __name__ == "__main__":
    main()
