"""`make bench`: every benchmark table, then the figures as JSON under bench/results/."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

from bench import compare, executor_bench, rpc_bench


def main() -> None:
    started = time.monotonic()
    figures: dict[str, Any] = {
        "executor": executor_bench.run_bench(),
        "rpc": rpc_bench.run_bench(),
        "compare": compare.run_bench(),
    }
    figures["seconds"] = time.monotonic() - started
    out = Path(__file__).parent / "results" / f"{dt.date.today().isoformat()}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(figures, indent=2, default=str))
    print(f"\nfigures written to {out} ({figures['seconds']:.0f} s in all)")


if __name__ == "__main__":
    main()
