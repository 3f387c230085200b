"""`eventflow certs`: a dev CA and one mTLS certificate per service.

The dev stack makes these itself under `.eventflow/certs`; this command is
for running services as separate processes (`eventflow serve ...`) on one
machine, or for inspecting what the stack uses. Existing files are kept.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cli.context import Context
from libs.identity import SERVICES, STACK, create_dev_pki

DEFAULT_DIR = Path(".eventflow") / "certs"


def certs(args: argparse.Namespace, ctx: Context) -> int:
    folder = create_dev_pki(Path(args.dir))
    names = ["ca", *SERVICES, STACK]
    print(f"certificates in {folder}:", file=ctx.out)
    for name in names:
        key = " + .key" if name != "ca" else " (CA; keep ca.key private)"
        print(f"  {name}.pem{key}", file=ctx.out)
    print(
        f"use them with EVENTFLOW_CERTS_DIR={folder} for `eventflow serve <service>`",
        file=ctx.out,
    )
    return 0


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "certs",
        help="create a dev CA and per-service certificates (kept if present)",
        description=__doc__,
    )
    parser.add_argument("--dir", default=str(DEFAULT_DIR), help=f"folder (default {DEFAULT_DIR})")
    parser.set_defaults(handler=certs)
