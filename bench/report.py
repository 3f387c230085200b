"""The side-by-side tables: each system's figures, eventflow/peer ratios, and eventflow's
fraction of each floor."""

from __future__ import annotations

import datetime as dt
import os
import platform
import sys
from typing import Any

PEERS = ("temporal", "dbos", "restate")


def progress(name: str, figures: dict[str, Any]) -> None:
    """One line per system as the run goes on (the tables come at the end)."""
    if "failed" in figures:
        state = f"FAILED: {figures['failed'].splitlines()[0] if figures['failed'] else ''}"
    else:
        state = ", ".join(
            f"{shape} {phase} {_runs(p)}"
            for shape, phases in _shapes(figures)
            for phase, p in phases.items()
        )
    print(f"[bench] {name}: {state}", file=sys.stderr, flush=True)


def _shapes(figures: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(k, v) for k, v in figures.items() if k.endswith("step") and isinstance(v, dict)]


def _runs(phase: dict[str, Any]) -> str:
    refused = f", {phase['refused']} refused" if phase.get("refused") else ""
    failed = f", {phase['failed']} failed" if phase.get("failed") else ""
    done = f"{phase['completed']}/{phase['offered']} done{refused}{failed}"
    return f"{phase.get('runs_per_s', 0):,.0f} runs/s ({done})"


def _get(system: dict[str, Any], shape: str, phase: str, key: str) -> float | None:
    value = system.get(shape, {}).get(phase, {}).get(key)
    return float(value) if isinstance(value, int | float) else None


FIGURES = (
    ("1step", "saturation", "runs_per_s", "1-step runs/s"),
    ("1step", "rate", "p50_ms", "1-step p50 ms"),
    ("1step", "rate", "p99_ms", "1-step p99 ms"),
    ("3step", "saturation", "runs_per_s", "3-step runs/s"),
    ("3step", "rate", "p50_ms", "3-step p50 ms"),
    ("3step", "rate", "p99_ms", "3-step p99 ms"),
)


def assemble(
    systems: dict[str, Any], floors: dict[str, float], plan: dict[str, Any]
) -> dict[str, Any]:
    """Everything `make bench` writes: the raw figures, the ratios and the fractions."""
    ours = systems.get("eventflow", {})
    ratios: dict[str, Any] = {}
    for name in PEERS:
        peer = systems.get(name, {})
        if "failed" in peer or "skipped" in peer:
            continue
        row: dict[str, float] = {}
        for shape, phase, key, _ in FIGURES:
            a, b = _get(ours, shape, phase, key), _get(peer, shape, phase, key)
            if a is not None and b:
                row[f"{shape}_{phase}_{key}"] = a / b
        for kind in ("server", "with_dependencies"):
            a, b = ours.get("memory_mb", {}).get(kind), peer.get("memory_mb", {}).get(kind)
            if a and b:
                row[f"memory_{kind}"] = a / b
        ratios[name] = row
    fractions: dict[str, float] = {}
    for shape, steps in (("1step", 1), ("3step", 3)):
        runs = _get(ours, shape, "saturation", "runs_per_s")
        if runs is None:
            continue
        # One event per run; one upsert and one action call per step.
        fractions[f"{shape}_of_kafka"] = runs / floors["kafka_msgs_per_s"]
        fractions[f"{shape}_of_postgres_upsert"] = (
            runs * steps / floors["postgres_upsert_rows_per_s"]
        )
        fractions[f"{shape}_of_wasm"] = runs * steps / floors["wasm_runs_per_s"]
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "plan": plan,
        "systems": systems,
        "floors": floors,
        "ratios_eventflow_over_peer": ratios,
        "eventflow_fraction_of_floor": fractions,
    }


def _cell(system: dict[str, Any], shape: str, phase: str, key: str) -> str:
    p = system.get(shape, {}).get(phase)
    if not p or key not in p:
        return "-"
    if key == "runs_per_s":
        flagged = bool(p.get("refused") or p.get("failed"))
        return f"{p[key]:,.0f}{'*' if flagged else ''}"
    return f"{p[key]:,.1f}" if p.get("complete") else f"{p[key]:,.1f}*"


def print_tables(f: dict[str, Any]) -> None:
    plan, systems = f["plan"], f["systems"]
    print(
        f"\nside by side: order scoring ({plan['saturation']:,} events offered at saturation;"
        f" {plan['rate']:g} events/s for {plan['rate_seconds']:g} s for latency;"
        f" {f['machine']['cores']} cores, one machine)"
    )
    heads = [label for *_, label in FIGURES]
    print(
        f"  {'system':<10}"
        + "".join(f"{h:>15}" for h in heads)
        + f"{'server MB':>11}{'+deps MB':>10}  versions"
    )
    for name, system in systems.items():
        if "skipped" in system:
            print(f"  {name:<10}  skipped: {system['skipped']}")
            continue
        cells = "".join(f"{_cell(system, s, p, k):>15}" for s, p, k, _ in FIGURES)
        mem = system.get("memory_mb", {})
        versions = ", ".join(f"{k} {v}" for k, v in system.get("versions", {}).items())
        print(
            f"  {name:<10}{cells}{mem.get('server', 0):>11,.0f}"
            f"{mem.get('with_dependencies', 0):>10,.0f}  {versions}"
        )
        if "failed" in system:
            reason = system["failed"].strip().replace("\n", "\n      ")
            print(f"      FAILED: {reason}")
    print(
        "  runs/s: runs of the shape completed per second while saturated (offers for up to"
        f" {plan['saturation_offer_s']:g} s, then up to {plan['saturation_timeout_s']:g} s"
        " more); * some offers refused or runs failed."
    )
    print(
        "  p50/p99: event accepted -> run complete at the fixed rate; * not every run completed"
        f" within {plan['rate_drain_s']:g} s after the last offer (figures over those that did)."
    )
    print(
        "  server MB: peak PSS of the system's own processes (server, workers, executor);"
        " +deps: with PostgreSQL, and the Kafka broker for eventflow."
    )

    print("\neventflow / peer (runs/s: higher is better for eventflow; latency, memory: lower)")
    print(
        f"  {'peer':<10}"
        + "".join(f"{h:>15}" for h in heads)
        + f"{'server MB':>11}{'+deps MB':>10}"
    )
    for name, row in f["ratios_eventflow_over_peer"].items():
        cells = "".join(f"{_ratio(row.get(f'{s}_{p}_{k}')):>15}" for s, p, k, _ in FIGURES)
        print(
            f"  {name:<10}{cells}{_ratio(row.get('memory_server')):>11}"
            f"{_ratio(row.get('memory_with_dependencies')):>10}"
        )

    floors, fractions = f["floors"], f["eventflow_fraction_of_floor"]
    print("\nfloors on this machine, and eventflow's saturation as a fraction of each")
    rows = (
        ("bare aiokafka produce -> consume", floors["kafka_msgs_per_s"], "msgs/s", "kafka"),
        (
            "batched PostgreSQL upsert (500/tx)",
            floors["postgres_upsert_rows_per_s"],
            "rows/s",
            "postgres_upsert",
        ),
        ("raw wasmtime-py instantiate + call", floors["wasm_runs_per_s"], "runs/s", "wasm"),
    )
    for label, value, unit, key in rows:
        one = fractions.get(f"1step_of_{key}")
        three = fractions.get(f"3step_of_{key}")
        shares = f"1-step {_pct(one):>7}   3-step {_pct(three):>7}"
        print(f"  {label:<36} {value:>10,.0f} {unit:<7}  {shares}")
    print("  (per step: one upsert and one action call; per run: one event)")


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"
