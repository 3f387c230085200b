"""Builds the example actions from source (AssemblyScript via npm) for tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ORDER_RISK_SCORER = (
    ROOT / "examples" / "actions" / "order-risk-scorer" / "build" / "order_risk_scorer.wasm"
)


def build_example_actions() -> None:
    """`make -C examples actions`; fails with its output (it needs node and npm)."""
    proc = subprocess.run(
        ["make", "-C", str(ROOT / "examples"), "actions"],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"`make -C examples actions` failed ({proc.returncode}); it needs node and npm"
            f"\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )


def order_risk_scorer() -> bytes:
    build_example_actions()
    return ORDER_RISK_SCORER.read_bytes()
