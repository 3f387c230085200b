"""npm packages, installed with `npm ci` from a committed package-lock.json into a cache.

The install folder is named by the lock file's hash, so an edited lock gets a fresh install
and an unchanged one is reused without asking the registry. Install scripts are not run:
nothing pinned here needs one (the buf package's only script swaps its launcher for the
binary it would otherwise find at run time).

CLI: ``python -m tests.harness.npm_tools <folder with package-lock.json>``.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

from tests.harness.toolcache import CACHE_ROOT, ToolError, file_lock, run

NPM_CACHE = CACHE_ROOT / "npm"
MARKER = ".installed"


def npm() -> str:
    found = shutil.which("npm")
    if found is None:
        raise ToolError("the npm command is not on PATH (Node.js 20 or newer is needed)")
    return found


def install(project: Path) -> Path:
    """`npm ci` for the project's lock file (once); the node_modules folder."""
    lock = project / "package-lock.json"
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    folder = NPM_CACHE / f"{project.name}-{digest}"
    if not (folder / MARKER).is_file():
        with file_lock(NPM_CACHE / f".{folder.name}.lock"):
            if not (folder / MARKER).is_file():
                shutil.rmtree(folder, ignore_errors=True)
                folder.mkdir(parents=True)
                shutil.copy2(project / "package.json", folder)
                shutil.copy2(lock, folder)
                run([npm(), "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=folder)
                (folder / MARKER).touch()
    return folder / "node_modules"


if __name__ == "__main__":
    print(install(Path(sys.argv[1]).resolve()))
