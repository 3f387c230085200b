"""`make bench`: every benchmark table, then the figures as JSON under bench/results/."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from bench import e2e_bench, executor_bench, rpc_bench


def main() -> None:
    figures = {
        "executor": executor_bench.run_bench(),
        "rpc": rpc_bench.run_bench(),
        "e2e": e2e_bench.run_bench(),
    }
    out = Path(__file__).parent / "results" / f"{dt.date.today().isoformat()}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(figures, indent=2, default=str))
    print(f"\nfigures written to {out}")


if __name__ == "__main__":
    main()
