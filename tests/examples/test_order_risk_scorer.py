"""The reference custom action examples/actions/order-risk-scorer (SPEC §5-§6).

Builds the action from source (`make -C examples actions`), then runs it with
raw wasmtime through a minimal guest-ABI harness — no eventflow code — under
the sandbox's limits (fuel, stack, memory). `reference_output` below is the
README's formula in Python; the module must agree with it exactly.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest
import wasmtime
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.peers.apps import job
from tests.harness.actions import ORDER_RISK_SCORER, build_example_actions

ROOT = Path(__file__).resolve().parents[2]
WASM = ORDER_RISK_SCORER

# SPEC §6 per-run limits.
FUEL = 50_000_000
MAX_STACK = 512 * 1024
MAX_MEMORY = 10 * 1024 * 1024
MAX_OUTPUT = 256 * 1024

ABSENT = object()  # marks a key left out of a payload


# --------------------------------------------------------------------------- harness


@dataclass(frozen=True)
class Run:
    pointer: int  # what execute returned (masked to u32)
    raw: bytes | None  # the document's bytes before the NUL; None when rejected
    fuel: int

    @property
    def rejected(self) -> bool:
        return self.pointer == 0

    def doc(self) -> Any:
        assert self.raw is not None, "the action rejected the payload"
        return json.loads(self.raw.decode("utf-8"))


def sandbox_engine() -> wasmtime.Engine:
    config = wasmtime.Config()
    config.consume_fuel = True
    config.max_wasm_stack = MAX_STACK
    config.wasm_threads = False
    config.wasm_memory64 = False
    config.wasm_multi_memory = False
    return wasmtime.Engine(config)


def call(
    engine: wasmtime.Engine,
    module: wasmtime.Module,
    data: bytes,
    instance: tuple[wasmtime.Store, wasmtime.Instance] | None = None,
) -> Run:
    """alloc(len); write the input there; execute(ptr, len); read to the NUL."""
    if instance is None:
        store = wasmtime.Store(engine)
        store.set_limits(memory_size=MAX_MEMORY)
        store.set_fuel(FUEL)
        inst = wasmtime.Instance(store, module, [])
    else:
        store, inst = instance
        store.set_fuel(FUEL)
    exports = inst.exports(store)
    memory, alloc, execute = exports["memory"], exports["alloc"], exports["execute"]
    assert isinstance(memory, wasmtime.Memory)
    assert isinstance(alloc, wasmtime.Func) and isinstance(execute, wasmtime.Func)

    ptr = alloc(store, len(data)) & 0xFFFFFFFF
    assert ptr != 0 and ptr + len(data) <= memory.data_len(store)
    memory.write(store, data, ptr)
    result = execute(store, ptr, len(data)) & 0xFFFFFFFF
    fuel = FUEL - store.get_fuel()
    if result == 0:
        return Run(0, None, fuel)
    size = memory.data_len(store)
    assert result < size, f"execute returned {result:#x}, outside memory ({size} bytes)"
    window = bytes(memory.read(store, result, min(result + MAX_OUTPUT + 1, size)))
    end = window.find(b"\0")
    assert end >= 0, "output is not NUL-terminated within the 256 KiB output limit"
    return Run(result, window[:end], fuel)


def envelope(
    payload: Any,
    secrets: dict[str, Any] | None = None,
    *,
    ensure_ascii: bool = True,
) -> bytes:
    return json.dumps(
        {
            "payload": payload,
            "secrets": {} if secrets is None else secrets,
            "permissions": ["read_secret:RISK_THRESHOLD"],
            "action": "order-risk-scorer",
        },
        ensure_ascii=ensure_ascii,
    ).encode("utf-8")


class Runner(Protocol):
    def __call__(
        self, payload: Any, secrets: dict[str, Any] | None = None, ensure_ascii: bool = True
    ) -> Run: ...


@pytest.fixture(scope="module")
def wasm_path() -> Path:
    build_example_actions()
    assert WASM.is_file()
    return WASM


@pytest.fixture(scope="module")
def engine() -> wasmtime.Engine:
    return sandbox_engine()


@pytest.fixture(scope="module")
def module(engine: wasmtime.Engine, wasm_path: Path) -> wasmtime.Module:
    return wasmtime.Module(engine, wasm_path.read_bytes())


@pytest.fixture(scope="module")
def run(engine: wasmtime.Engine, module: wasmtime.Module) -> Runner:
    """run(payload, secrets=None, ensure_ascii=True) -> Run, on a fresh instance."""

    def _run(payload: Any, secrets: dict[str, Any] | None = None, ensure_ascii: bool = True) -> Run:
        return call(engine, module, envelope(payload, secrets, ensure_ascii=ensure_ascii))

    return _run


# --------------------------------------------------------------------------- reference

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
ASCII_WS = " \t\r\n"


# The README's "Score formula" in Python; the benchmark's peers compute the same.
reference_score = job.score


def reference_threshold(secrets: dict[str, Any]) -> int | None:
    if "RISK_THRESHOLD" not in secrets:
        return 70
    raw = secrets["RISK_THRESHOLD"]
    if not isinstance(raw, str):
        return None
    text = raw.strip(ASCII_WS)
    if not 1 <= len(text) <= 9 or any(c not in "0123456789" for c in text):
        return None
    value = int(text)
    return value if value <= 100 else None


def reference_output(payload: Any, secrets: dict[str, Any] | None = None) -> Any:
    """The expected document, or None when the action must reject."""
    threshold = reference_threshold(secrets or {})
    if threshold is None or not isinstance(payload, dict):
        return None
    order_id, amount = payload.get("orderId"), payload.get("amount")
    if not isinstance(order_id, str) or not order_id.strip(ASCII_WS):
        return None
    if len(order_id) > 200:  # code points, like the module (a lone surrogate counts as one)
        return None
    if not job.is_number(amount) or not math.isfinite(amount) or amount < 0:
        return None
    score, reasons = reference_score(payload)
    flagged = score >= threshold
    return {
        "projection": {
            "name": "order_risk",
            "entity_type": "order",
            "entity_id": order_id,
            "title": f"Order {order_id}"[:200],
            "status": "review" if flagged else "ok",
            "data": {"score": score, "threshold": threshold, "reasons": reasons},
        },
        "derived_event": (
            {"type": "orders.risk_flagged", "payload": {"orderId": order_id, "score": score}}
            if flagged
            else False
        ),
        "score": score,
    }


def order(**changes: Any) -> dict[str, Any]:
    """A zero-risk order; keyword arguments replace (or, with ABSENT, drop) fields."""
    base: dict[str, Any] = {
        "orderId": "o-123",
        "amount": 129.5,
        "currency": "EUR",
        "country": "DE",
        "items": [
            {"sku": "SKU-1", "qty": 2, "price": 10.0},
            {"sku": "SKU-2", "qty": 1, "price": 109.5},
        ],
        "customer": {"id": "c-9", "email": "ada@example.com", "accountAgeDays": 400},
    }
    for key, value in changes.items():
        if value is ABSENT:
            base.pop(key, None)
        else:
            base[key] = value
    return base


def customer(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"id": "c-9", "email": "ada@example.com", "accountAgeDays": 400}
    for key, value in changes.items():
        if value is ABSENT:
            base.pop(key, None)
        else:
            base[key] = value
    return base


HIGH_RISK = order(
    orderId="o-991",
    amount=1500,
    currency="USD",
    country="DE",
    items=[{"sku": "GPU", "qty": 12, "price": 125}],
    customer=customer(accountAgeDays=3),
)


# --------------------------------------------------------------------------- the module


def test_module_has_no_imports(module: wasmtime.Module) -> None:
    assert list(module.imports) == []


def test_exports_are_exactly_the_abi(module: wasmtime.Module) -> None:
    exports = {e.name: e.type for e in module.exports}
    assert set(exports) == {"memory", "execute", "alloc"}
    assert isinstance(exports["memory"], wasmtime.MemoryType)
    execute, alloc = exports["execute"], exports["alloc"]
    assert isinstance(execute, wasmtime.FuncType) and isinstance(alloc, wasmtime.FuncType)
    i32 = wasmtime.ValType.i32()
    assert list(execute.params) == [i32, i32] and list(execute.results) == [i32]
    assert list(alloc.params) == [i32] and list(alloc.results) == [i32]


def test_module_is_small(wasm_path: Path) -> None:
    assert wasm_path.stat().st_size < 64 * 1024


# --------------------------------------------------------------------------- scoring


def test_low_risk_order_is_ok_and_emits_nothing(run: Runner) -> None:
    assert run(order()).doc() == {
        "projection": {
            "name": "order_risk",
            "entity_type": "order",
            "entity_id": "o-123",
            "title": "Order o-123",
            "status": "ok",
            "data": {"score": 0, "threshold": 70, "reasons": []},
        },
        "derived_event": False,
        "score": 0,
    }


def test_high_risk_order_is_flagged_with_a_derived_event(run: Runner) -> None:
    # 25 amount_high + 25 account_new + 10 many_units + 15 currency_mismatch
    assert run(HIGH_RISK).doc() == {
        "projection": {
            "name": "order_risk",
            "entity_type": "order",
            "entity_id": "o-991",
            "title": "Order o-991",
            "status": "review",
            "data": {
                "score": 75,
                "threshold": 70,
                "reasons": ["amount_high", "account_new", "many_units", "currency_mismatch"],
            },
        },
        "derived_event": {
            "type": "orders.risk_flagged",
            "payload": {"orderId": "o-991", "score": 75},
        },
        "score": 75,
    }


def test_score_is_capped_at_100(run: Runner) -> None:
    doc = run({"orderId": "o-worst", "amount": 9000, "country": "ZZ"}).doc()
    # 40 + 20 + 15 + 30 + 10 + 10 = 125 before the cap
    assert doc["score"] == 100 and doc["projection"]["data"]["score"] == 100
    assert doc["projection"]["data"]["reasons"] == [
        "amount_very_high",
        "account_age_unknown",
        "no_items",
        "country_review_list",
        "currency_invalid",
        "email_invalid",
    ]


@pytest.mark.parametrize(
    ("changes", "score", "reasons"),
    [
        ({"amount": 249.99}, 0, []),
        ({"amount": 250}, 10, ["amount_elevated"]),
        ({"amount": 999.99}, 10, ["amount_elevated"]),
        ({"amount": 1000}, 25, ["amount_high"]),
        ({"amount": 4999.99}, 25, ["amount_high"]),
        ({"amount": 5000}, 40, ["amount_very_high"]),
        ({"amount": 0}, 0, []),
        ({"customer": customer(accountAgeDays=0)}, 25, ["account_new"]),
        ({"customer": customer(accountAgeDays=6.9)}, 25, ["account_new"]),
        ({"customer": customer(accountAgeDays=7)}, 10, ["account_recent"]),
        ({"customer": customer(accountAgeDays=29)}, 10, ["account_recent"]),
        ({"customer": customer(accountAgeDays=30)}, 0, []),
        ({"customer": customer(accountAgeDays="12")}, 20, ["account_age_unknown"]),
        ({"customer": customer(accountAgeDays=ABSENT)}, 20, ["account_age_unknown"]),
        ({"customer": ABSENT}, 30, ["account_age_unknown", "email_invalid"]),
        ({"items": []}, 15, ["no_items"]),
        ({"items": ABSENT}, 15, ["no_items"]),
        ({"items": {"sku": "x"}}, 15, ["no_items"]),
        ({"items": [{"qty": 9}]}, 0, []),
        ({"items": [{"qty": 4}, {"qty": 6}]}, 10, ["many_units"]),
        ({"items": [{"qty": 19.99}]}, 10, ["many_units"]),
        ({"items": [{"qty": 20}]}, 20, ["bulk_quantity"]),
        ({"items": [{"qty": 25}, {"qty": -30}]}, 20, ["bulk_quantity"]),
        ({"items": [{"sku": "no-qty"}] * 10}, 10, ["many_units"]),
        ({"items": ["a", 1, None, {"qty": "7"}, {"qty": 6}]}, 10, ["many_units"]),
        ({"country": "ZZ", "currency": "USD"}, 30, ["country_review_list"]),
        ({"country": "AQ"}, 30, ["country_review_list"]),
        ({"country": "de"}, 15, ["country_unknown"]),
        ({"country": "DEU"}, 15, ["country_unknown"]),
        ({"country": ABSENT}, 15, ["country_unknown"]),
        ({"country": "SE", "currency": "SEK"}, 0, []),
        ({"country": "SE", "currency": "EUR"}, 0, []),
        ({"currency": "USD"}, 15, ["currency_mismatch"]),
        ({"country": "GB", "currency": "GBP"}, 0, []),
        ({"country": "GB", "currency": "EUR"}, 15, ["currency_mismatch"]),
        ({"currency": "eur"}, 10, ["currency_invalid"]),
        ({"currency": ABSENT}, 10, ["currency_invalid"]),
        ({"country": "de", "currency": "USD"}, 15, ["country_unknown"]),
        ({"customer": customer(email="nobody")}, 10, ["email_invalid"]),
        ({"customer": customer(email="@example.com")}, 10, ["email_invalid"]),
        ({"customer": customer(email="ada@")}, 10, ["email_invalid"]),
        ({"customer": customer(email="a@b")}, 0, []),
        ({"customer": customer(email=ABSENT)}, 10, ["email_invalid"]),
    ],
)
def test_each_rule(run: Runner, changes: dict[str, Any], score: int, reasons: list[str]) -> None:
    payload = order(**changes)
    doc = run(payload).doc()
    assert doc["score"] == score
    assert doc["projection"]["data"]["reasons"] == reasons
    assert doc == reference_output(payload)


def test_the_example_payload_from_the_docs(run: Runner) -> None:
    payload = {
        "orderId": "o-123",
        "amount": 129.5,
        "currency": "EUR",
        "country": "DE",
        "items": [{"sku": "...", "qty": 2, "price": 10.0}],
        "customer": {"id": "c-9", "email": "...", "accountAgeDays": 12},
    }
    doc = run(payload).doc()
    assert doc["projection"]["data"] == {
        "score": 20,
        "threshold": 70,
        "reasons": ["account_recent", "email_invalid"],
    }


def test_score_and_threshold_are_json_integers(run: Runner) -> None:
    raw = run(HIGH_RISK).raw
    assert raw is not None
    data = json.loads(raw)["projection"]["data"]
    assert type(data["score"]) is int and type(data["threshold"]) is int
    assert b'"score":75' in raw and b'"threshold":70' in raw


small = st.sampled_from
payloads = st.fixed_dictionaries(
    {"orderId": small(["o-1", "ord-\u00e9-\U0001f600", "x" * 200])},
    optional={
        "amount": small([0, 0.01, 249.99, 250, 999.5, 1000, 4999.999, 5000, 1e9, -1, "5", None]),
        "currency": small(["EUR", "USD", "GBP", "JPY", "SEK", "eur", "EURO", "", None]),
        "country": small(["DE", "US", "GB", "JP", "SE", "ZZ", "AQ", "HM", "de", "D", None]),
        "items": st.one_of(
            small([None, {}, "items"]),
            st.lists(
                st.one_of(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "qty": small([0, 1, 2, 3.7, 9, 10, 19, 20, -4, "2", None, True]),
                            "sku": st.just("S"),
                        },
                    ),
                    small([1, "x", None]),
                ),
                max_size=6,
            ),
        ),
        "customer": st.one_of(
            small([None, "c-9", []]),
            st.fixed_dictionaries(
                {},
                optional={
                    "email": small(["a@b.c", "ab", "@b", "a@", "a@@b", "", 7]),
                    "accountAgeDays": small([-1, 0, 6, 6.99, 7, 29.5, 30, 1000, "3", None, False]),
                },
            ),
        ),
    },
)
secret_values = st.one_of(
    st.just(ABSENT),
    small(
        ["0", "1", "50", "70", "71", "100", "101", "007", " 60\n", "", "7.5", "-1", "1e2", "abc"]
    ),
    small([70, None, True]),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(payload=payloads, secret=secret_values)
def test_module_matches_the_readme_formula(
    run: Runner, payload: dict[str, Any], secret: Any
) -> None:
    secrets = {} if secret is ABSENT else {"RISK_THRESHOLD": secret}
    result = run(payload, secrets)
    expected = reference_output(payload, secrets)
    if expected is None:
        assert result.rejected
    else:
        assert result.doc() == expected


# --------------------------------------------------------------------------- threshold


def test_absent_secret_means_threshold_70(run: Runner) -> None:
    at_70 = order(amount=1000, customer=customer(accountAgeDays=3), items=[{"qty": 20}])
    doc = run(at_70, {}).doc()  # 25 + 25 + 20
    assert doc["score"] == 70
    assert doc["projection"]["data"]["threshold"] == 70
    assert doc["projection"]["status"] == "review"  # score >= threshold
    below = run(order(amount=1000, customer=customer(accountAgeDays=3), items=[{"qty": 19}])).doc()
    assert below["score"] == 60 and below["derived_event"] is False


def test_other_secrets_do_not_matter(run: Runner) -> None:
    assert run(HIGH_RISK, {"OTHER": "5"}).doc() == run(HIGH_RISK, {}).doc()


def test_threshold_from_secrets_changes_the_decision(run: Runner) -> None:
    lenient = run(HIGH_RISK, {"RISK_THRESHOLD": "80"}).doc()
    assert lenient["score"] == 75
    assert lenient["projection"]["status"] == "ok"
    assert lenient["projection"]["data"]["threshold"] == 80
    assert lenient["derived_event"] is False

    strict = run(order(customer=customer(accountAgeDays=12)), {"RISK_THRESHOLD": "10"}).doc()
    assert strict["score"] == 10
    assert strict["projection"]["status"] == "review"
    assert strict["derived_event"] == {
        "type": "orders.risk_flagged",
        "payload": {"orderId": "o-123", "score": 10},
    }

    assert run(order(), {"RISK_THRESHOLD": "0"}).doc()["projection"]["status"] == "review"
    worst = {"orderId": "o-worst", "amount": 9000, "country": "ZZ"}
    assert run(worst, {"RISK_THRESHOLD": "100"}).doc()["projection"]["status"] == "review"


def test_threshold_whitespace_is_trimmed(run: Runner) -> None:
    doc = run(HIGH_RISK, {"RISK_THRESHOLD": " 75\n"}).doc()
    assert doc["projection"]["data"]["threshold"] == 75
    assert doc["projection"]["status"] == "review"


@pytest.mark.parametrize(
    "bad", ["", "  ", "abc", "70.5", "-1", "+5", "101", "1e2", "\uff17\uff10", 70, None, True]
)
def test_a_malformed_threshold_rejects(run: Runner, bad: Any) -> None:
    assert run(order(), {"RISK_THRESHOLD": bad}).rejected


# --------------------------------------------------------------------------- rejection


@pytest.mark.parametrize(
    "payload",
    [
        order(orderId=ABSENT),
        order(orderId=""),
        order(orderId=" \t\n"),
        order(orderId=None),
        order(orderId=123),
        order(orderId=["o-1"]),
        order(orderId="x" * 201),
        order(orderId="\U0001f600" * 201),
        order(amount=ABSENT),
        order(amount=None),
        order(amount="129.5"),
        order(amount=True),
        order(amount={"value": 1}),
        order(amount=-0.01),
        order(amount=-1000),
        [order()],
        "o-123",
        None,
    ],
    ids=lambda p: json.dumps(p)[:40],
)
def test_malformed_payload_is_rejected(run: Runner, payload: Any) -> None:
    result = run(payload)
    assert result.rejected and result.raw is None


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b'{"payload": {"orderId": "o-1", "amount": 1}',
        b'[{"payload": {"orderId": "o-1", "amount": 1}}]',
        b'{"secrets": {}, "action": "x"}',
        b'{"payload": {"orderId": "o-1", "amount": 1e400}, "secrets": {}}',
        b'{"payload": {"orderId": "o-1", "amount": NaN}, "secrets": {}}',
        b'{"payload": {"orderId": "o-1", "amount": 1,}, "secrets": {}}',
        b'{"payload": {"orderId": "o-1", "amount": 1}} trailing',
        b"[" * 200 + b"]" * 200,
    ],
)
def test_malformed_envelope_is_rejected(
    engine: wasmtime.Engine, module: wasmtime.Module, data: bytes
) -> None:
    assert call(engine, module, data).rejected


def test_minimal_envelope_is_accepted(engine: wasmtime.Engine, module: wasmtime.Module) -> None:
    # secrets / permissions / action missing: read as empty.
    result = call(engine, module, b'{"payload": {"orderId": "o-1", "amount": 1}}')
    assert result.doc()["projection"]["data"]["threshold"] == 70


def test_escaped_and_duplicate_keys_are_read_like_any_json_parser(
    engine: wasmtime.Engine, module: wasmtime.Module
) -> None:
    data = (
        b'{"payload": {"\\u006frderId": "o-1", "amount": 1, "amount": 2000, "country": "Z\\u005a"},'
        b' "secrets": {}}'
    )
    assert json.loads(data)["payload"] == {"orderId": "o-1", "amount": 2000, "country": "ZZ"}
    doc = call(engine, module, data).doc()
    assert doc["projection"]["entity_id"] == "o-1"
    assert doc["projection"]["data"]["reasons"][0] == "amount_high"  # the last "amount" wins
    assert "country_review_list" in doc["projection"]["data"]["reasons"]


# --------------------------------------------------------------------------- output contract


def test_output_is_nul_terminated_utf8_json(
    engine: wasmtime.Engine, module: wasmtime.Module
) -> None:
    store = wasmtime.Store(engine)
    store.set_fuel(FUEL)
    instance = wasmtime.Instance(store, module, [])
    result = call(engine, module, envelope(HIGH_RISK), (store, instance))
    assert result.raw is not None
    memory = instance.exports(store)["memory"]
    assert isinstance(memory, wasmtime.Memory)
    end = result.pointer + len(result.raw)
    assert memory.read(store, end, end + 1) == b"\0"
    assert b"\0" not in result.raw
    text = result.raw.decode("utf-8")  # strict: valid UTF-8
    doc = json.loads(text)
    assert list(doc) == ["projection", "derived_event", "score"]
    assert len(result.raw) < MAX_OUTPUT


def test_reserved_keys_follow_the_spec_shapes(run: Runner) -> None:
    for payload in (order(), HIGH_RISK):
        doc = run(payload).doc()
        projection = doc["projection"]
        assert set(projection) == {"name", "entity_type", "entity_id", "title", "status", "data"}
        assert projection["name"] == "order_risk" and projection["entity_type"] == "order"
        assert len(projection["title"]) <= 200 and len(projection["status"]) <= 40
        event = doc["derived_event"]
        assert event is False or set(event) == {"type", "payload"}


def test_fresh_instances_give_identical_results(
    engine: wasmtime.Engine, module: wasmtime.Module
) -> None:
    inputs = [
        envelope(HIGH_RISK),
        envelope(order()),
        envelope(order(orderId="")),
        envelope(HIGH_RISK),
    ]
    first = [call(engine, module, data) for data in inputs]
    again = [call(engine, module, data) for data in reversed(inputs)][::-1]
    assert [r.raw for r in first] == [r.raw for r in again]
    assert first[0].raw == first[3].raw
    assert [r.pointer for r in first] == [r.pointer for r in again]
    assert [r.fuel for r in first] == [r.fuel for r in again]


def test_no_state_leaks_even_when_an_instance_is_reused(
    engine: wasmtime.Engine, module: wasmtime.Module
) -> None:
    # The host never does this (each run gets a fresh instance), but the action
    # keeps no state in globals either.
    store = wasmtime.Store(engine)
    store.set_fuel(FUEL)
    instance = wasmtime.Instance(store, module, [])
    reused = [
        call(engine, module, envelope(p, s), (store, instance)).raw
        for p, s in [(HIGH_RISK, {"RISK_THRESHOLD": "90"}), (HIGH_RISK, None), (order(), None)]
    ]
    fresh = [
        call(engine, module, envelope(p, s)).raw
        for p, s in [(HIGH_RISK, {"RISK_THRESHOLD": "90"}), (HIGH_RISK, None), (order(), None)]
    ]
    assert reused == fresh


@pytest.mark.parametrize("ensure_ascii", [True, False], ids=["escaped", "raw-utf8"])
def test_unicode_order_id_round_trips(run: Runner, ensure_ascii: bool) -> None:
    order_id = 'заказ-訂單-é-\U0001f600-"q"\\-\n\t-\u2028-\x01'
    doc = run({**HIGH_RISK, "orderId": order_id}, ensure_ascii=ensure_ascii).doc()
    assert doc["projection"]["entity_id"] == order_id
    assert doc["projection"]["title"] == f"Order {order_id}"
    assert doc["derived_event"]["payload"]["orderId"] == order_id


def test_lone_surrogate_in_order_id_stays_valid_utf8(run: Runner) -> None:
    result = run({**HIGH_RISK, "orderId": "o-\ud800-x"})  # only expressible escaped
    assert result.raw is not None
    assert b"\\ud800" in result.raw
    assert result.doc()["projection"]["entity_id"] == "o-\ud800-x"


def test_long_order_id_title_is_cut_to_200_characters(run: Runner) -> None:
    order_id = "\U0001f600" * 200  # 200 code points, 400 UTF-16 units
    doc = run({**HIGH_RISK, "orderId": order_id}).doc()
    assert doc["projection"]["entity_id"] == order_id
    assert doc["projection"]["title"] == "Order " + "\U0001f600" * 194


def test_a_1_mib_order_fits_the_sandbox_limits(run: Runner) -> None:
    # SPEC §3: payloads are at most 1 MiB. Realistic items, ~10k of them.
    item = {"sku": "SKU-00000", "qty": 1, "price": 1.25, "note": "x" * 40}
    count = (1024 * 1024 - 300) // len(json.dumps(item) + ", ")
    payload = order(items=[{**item, "sku": f"SKU-{i:05d}"} for i in range(count)], amount=6250)
    assert 1000 * 1000 < len(json.dumps(payload)) <= 1024 * 1024
    result = run(payload)  # fuel, stack and memory limits as in the sandbox
    assert result.doc()["projection"]["data"]["reasons"] == ["amount_very_high", "bulk_quantity"]
    assert result.fuel < FUEL


def test_typical_order_is_cheap(run: Runner) -> None:
    assert run(HIGH_RISK).fuel < 500_000
