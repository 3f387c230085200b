"""The benchmarks' job, "order scoring", as every peer runs it: the arithmetic of the
reference action (examples/actions/order-risk-scorer, README "Score formula") in Python,
and the row it keeps per order.

Standard library only: the peers' workers import this file from the peer venv, and
eventflow's side of the benchmark imports it as ``bench.peers.apps.job``.
"""

from __future__ import annotations

import json
import math
from typing import Any, TypeGuard

EVENT_TYPE = "orders.created"
THRESHOLD = 70  # the action's default: no RISK_THRESHOLD secret
REVIEW_COUNTRIES = {"AQ", "BV", "HM", "XX", "ZZ"}
EXPECTED_CURRENCY = {
    **dict.fromkeys(["AT", "BE", "DE", "ES", "FI", "FR", "IE", "IT", "NL", "PT"], "EUR"),
    "GB": "GBP",
    "US": "USD",
    "CA": "CAD",
    "CH": "CHF",
    "JP": "JPY",
    "AU": "AUD",
}

# The peers' copy of eventflow's keyed projection row (orchestrator.projections).
TABLE = "bench_order_risk"
CREATE_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (order_id text PRIMARY KEY, title text NOT NULL,"
    " status text NOT NULL, data jsonb NOT NULL, steps_done int NOT NULL DEFAULT 1,"
    " update_time timestamptz NOT NULL DEFAULT now())"
)
UPSERT = (
    f"INSERT INTO {TABLE} (order_id, title, status, data) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT (order_id) DO UPDATE SET title = excluded.title, status = excluded.status,"
    f" data = excluded.data, steps_done = {TABLE}.steps_done + 1, update_time = now()"
)
# How far the runs under a prefix got, read from the rows alone: a driver polls this instead
# of the engine, whose own bookkeeping (Temporal's SQLite above all) slows under queries.
PROGRESS = f"SELECT count(*) FROM {TABLE} WHERE order_id LIKE %s AND steps_done >= %s"
ROWS = f"SELECT order_id, data FROM {TABLE} WHERE order_id LIKE %s"


def order(order_id: str) -> dict[str, Any]:
    """An order of about 300 bytes of JSON that scores 0 (so no derived event anywhere)."""
    return {
        "orderId": order_id,
        "amount": 120.5,
        "currency": "EUR",
        "country": "DE",
        "items": [
            {"sku": "A-1", "qty": 2, "price": 50.25},
            {"sku": "B-7", "qty": 1, "price": 20.0},
        ],
        "customer": {"id": "c-4711", "email": "ada@example.com", "accountAgeDays": 400},
        "shipping": {"street": "Invalidenstr. 117", "city": "Berlin", "postcode": "10115"},
    }


def is_number(v: Any) -> TypeGuard[int | float]:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _is_upper_code(v: Any, n: int) -> bool:
    return isinstance(v, str) and len(v) == n and all("A" <= c <= "Z" for c in v)


def score(p: dict[str, Any]) -> tuple[int, list[str]]:
    """The reference action's score, rule by rule (README "Score formula")."""
    points, reasons = 0, []

    def add(n: int, reason: str) -> None:
        nonlocal points
        points += n
        reasons.append(reason)

    amount = p["amount"]
    if amount >= 5000:
        add(40, "amount_very_high")
    elif amount >= 1000:
        add(25, "amount_high")
    elif amount >= 250:
        add(10, "amount_elevated")

    customer = p.get("customer")
    customer = customer if isinstance(customer, dict) else {}
    age = customer.get("accountAgeDays")
    if not is_number(age):
        add(20, "account_age_unknown")
    elif age < 7:
        add(25, "account_new")
    elif age < 30:
        add(10, "account_recent")

    items = p.get("items")
    items = items if isinstance(items, list) else []
    if not items:
        add(15, "no_items")
    else:
        units = 0
        for item in items:
            qty = item.get("qty") if isinstance(item, dict) else None
            units += math.floor(max(qty, 0)) if is_number(qty) else 1
        if units >= 20:
            add(20, "bulk_quantity")
        elif units >= 10:
            add(10, "many_units")

    country = p.get("country")
    country_ok = _is_upper_code(country, 2)
    if not country_ok:
        add(15, "country_unknown")
    elif country in REVIEW_COUNTRIES:
        add(30, "country_review_list")

    currency = p.get("currency")
    if not _is_upper_code(currency, 3):
        add(10, "currency_invalid")
    elif country_ok and country in EXPECTED_CURRENCY and EXPECTED_CURRENCY[country] != currency:
        add(15, "currency_mismatch")

    email = customer.get("email")
    if not (isinstance(email, str) and "@" in email[1:-1]):
        add(10, "email_invalid")

    return min(points, 100), reasons


def projection(p: dict[str, Any]) -> dict[str, Any]:
    """The row the action's output upserts: same name, key, title, status and data."""
    points, reasons = score(p)
    order_id = p["orderId"]
    return {
        "name": "order_risk",
        "entity_type": "order",
        "entity_id": order_id,
        "title": f"Order {order_id}"[:200],
        "status": "review" if points >= THRESHOLD else "ok",
        "data": {"score": points, "threshold": THRESHOLD, "reasons": reasons},
    }


def upsert_args(p: dict[str, Any]) -> tuple[str, str, str, str]:
    """Parameters of UPSERT for one scored order (data as JSON text)."""
    row = projection(p)
    return row["entity_id"], row["title"], row["status"], json.dumps(row["data"])


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def phase_figures(
    sent: dict[str, float], done: dict[str, float], accepted: dict[str, float] | None = None
) -> dict[str, float]:
    """Runs/s from the first send to the last completion, and latency percentiles (ms).

    ``sent``: run key -> wall clock when it was offered; ``accepted``: when the system
    acknowledged it (the broker's ack, the client call's return), where latency starts, as
    the issue defines it ("event accepted -> run complete"); ``done``: when the engine
    recorded it complete. The same percentiles from the offer are kept beside them
    (``*_from_offer_ms``): they add the client's own send. Keys without a completion are
    not counted.
    """
    finished = [k for k in sent if k in done]
    if not finished:
        return {"offered": len(sent), "completed": 0}
    start = accepted if accepted is not None else sent
    latencies = [(done[k] - start.get(k, sent[k])) * 1000 for k in finished]
    from_offer = [(done[k] - sent[k]) * 1000 for k in finished]
    elapsed = max(done[k] for k in finished) - min(sent.values())
    return {
        "offered": len(sent),
        "completed": len(finished),
        "runs_per_s": len(finished) / elapsed if elapsed > 0 else 0.0,
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
        "p50_from_offer_ms": percentile(from_offer, 0.5),
        "p99_from_offer_ms": percentile(from_offer, 0.99),
    }
