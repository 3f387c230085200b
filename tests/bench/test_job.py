"""The peers compute what eventflow's reference action computes.

The benchmarks' peers run the order-scoring arithmetic in Python (bench/peers/apps/job.py)
while eventflow runs the action's WebAssembly; a side-by-side figure means something only
if both produce the same row for the same order.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
import wasmtime

from bench.peers.apps import job
from tests.harness.actions import order_risk_scorer


@pytest.fixture(scope="module")
def action() -> Any:
    engine = wasmtime.Engine()
    module = wasmtime.Module(engine, order_risk_scorer())

    def run(order: dict[str, Any]) -> dict[str, Any]:
        store = wasmtime.Store(engine)
        instance = wasmtime.Instance(store, module, [])
        exports = instance.exports(store)
        memory, alloc, execute = exports["memory"], exports["alloc"], exports["execute"]
        assert isinstance(memory, wasmtime.Memory)
        assert isinstance(alloc, wasmtime.Func) and isinstance(execute, wasmtime.Func)
        data = json.dumps({"payload": order, "secrets": {}, "permissions": [], "action": "b"})
        raw = data.encode()
        pointer = alloc(store, len(raw))
        memory.write(store, raw, pointer)
        out = execute(store, pointer, len(raw))
        assert out, f"the action rejected {order}"
        window = bytes(memory.read(store, out, memory.data_len(store)))
        return dict(json.loads(window[: window.index(b"\0")]))

    return run


def orders() -> list[dict[str, Any]]:
    """The benchmark's order and variations that reach every rule of the formula."""
    variants = []
    amounts = (120.5, 250, 1000, 5000)
    ages = (400, 29, 3, None)
    countries = (("DE", "EUR"), ("DE", "USD"), ("ZZ", "EUR"), ("de", "EUR"), ("US", "usd"))
    quantities = ((2, 1), (10,), (25,), ())
    for n, (amount, age, (country, currency), qty) in enumerate(
        itertools.product(amounts, ages, countries, quantities)
    ):
        order = job.order(f"o-{n}")
        order.update(amount=amount, country=country, currency=currency)
        order["items"] = [{"sku": "A", "qty": q, "price": 1.0} for q in qty]
        if age is None:
            del order["customer"]["accountAgeDays"]
        if n % 7 == 0:
            order["customer"]["email"] = "not-an-address"
        variants.append(order)
    return variants


def test_the_benchmark_order_is_about_300_bytes_and_scores_0(action: Any) -> None:
    order = job.order("eventflow-1step-saturation-000001")
    assert 280 <= len(json.dumps(order, separators=(",", ":"))) <= 340
    assert job.score(order) == (0, [])
    assert action(order)["projection"] == job.projection(order)


def test_python_arithmetic_gives_the_actions_row_for_every_rule(action: Any) -> None:
    checked = orders()
    scores = set()
    for order in checked:
        assert action(order)["projection"] == job.projection(order), order
        scores.add(job.score(order)[0])
    assert len(checked) == 320 and len(scores) > 10
    assert any(job.projection(o)["status"] == "review" for o in checked)
