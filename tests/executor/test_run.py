"""Single runs in this process: happy paths and the hostile-module suite (SPEC §6).

Modules are compiled here directly, bypassing the upload checks, because
the runtime must hold even for modules upload would have refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from wasmtime import Engine, Module

from services.executor.sandbox.engine import EpochTicker, new_engine
from services.executor.sandbox.limits import DEFAULT_LIMITS, Limits, MiB
from services.executor.sandbox.result import (
    DerivedEvent,
    FailureReason,
    Projection,
    RunResult,
)
from services.executor.sandbox.run import Runnable, Runner, runnable_from_module

from . import modules as m

SECRET = "s3cr3t-value-that-must-never-appear"
ENVELOPE = json.dumps(
    {
        "payload": {"order": "o-1", "amount": 12},
        "secrets": {"RISK_THRESHOLD": SECRET},
        "permissions": ["read_secret:RISK_THRESHOLD"],
        "action": "scorer",
    }
).encode()


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    engine = new_engine()
    with EpochTicker(engine, DEFAULT_LIMITS.epoch_tick_seconds):
        yield engine


@pytest.fixture(scope="module")
def runner(engine: Engine) -> Runner:
    return Runner(engine)


def load(engine: Engine, wat: str) -> Runnable:
    return runnable_from_module(Module(engine, wat))


def run(runner: Runner, engine: Engine, wat: str, envelope: bytes = ENVELOPE) -> RunResult:
    return runner.run(load(engine, wat), envelope)


def failed(result: RunResult, reason: FailureReason) -> str:
    assert result.failure is not None, result
    assert result.failure.reason is reason, result.failure
    assert SECRET not in result.failure.message
    return result.failure.message


# ---------------------------------------------------------------------------- happy paths


def test_input_placed_by_growing_memory_when_there_is_no_alloc(
    runner: Runner, engine: Engine
) -> None:
    result = run(runner, engine, m.ECHO)
    assert result.ok and result.output is not None
    assert result.output.data == json.loads(ENVELOPE)
    # One page of its own plus the page the host grew for the input.
    assert result.metrics.peak_memory_bytes == 2 * 65536


def test_input_placed_by_alloc(runner: Runner, engine: Engine) -> None:
    result = run(runner, engine, m.ECHO_ALLOC)
    assert result.output is not None
    assert result.output.data == json.loads(ENVELOPE)
    assert result.metrics.peak_memory_bytes == 65536


def test_alloc_that_grows_memory_gets_a_valid_placement(runner: Runner, engine: Engine) -> None:
    big = json.dumps({"payload": {"blob": "x" * 200_000}}).encode()
    result = run(runner, engine, m.ECHO_ALLOC, big)
    assert result.output is not None
    assert result.output.data == json.loads(big)
    assert result.metrics.peak_memory_bytes > 200_000


def test_output_in_memory_grown_during_execute(runner: Runner, engine: Engine) -> None:
    result = run(runner, engine, m.OUTPUT_IN_GROWN_MEMORY)
    assert result.output is not None and result.output.data == {"grown": True}


def test_projection_upsert_and_derived_event(runner: Runner, engine: Engine) -> None:
    document = {
        "projection": {
            "name": "orders",
            "entity_type": "order",
            "entity_id": "o-1",
            "title": "Order o-1",
            "status": "flagged",
            "data": {"score": 91},
        },
        "derived_event": {"type": "order.flagged", "payload": {"order": "o-1"}},
        "score": 91,
    }
    result = run(runner, engine, m.static_output(json.dumps(document).encode()))
    assert result.output is not None
    assert result.output.projection == Projection(
        "orders", "order", "o-1", "Order o-1", "flagged", {"score": 91}
    )
    assert result.output.projection.keyed
    assert result.output.derived_event == DerivedEvent("order.flagged", {"order": "o-1"})
    assert result.output.data == {"score": 91}


def test_projection_append_and_suppressed_event(runner: Runner, engine: Engine) -> None:
    document = {"projection": {"name": "audit", "data": [1]}, "derived_event": False}
    result = run(runner, engine, m.static_output(json.dumps(document).encode(), alloc=True))
    assert result.output is not None
    assert result.output.projection == Projection("audit", data=[1])
    assert not result.output.projection.keyed
    assert result.output.derived_event is None
    assert result.output.data == {}


def test_metrics_are_reported(runner: Runner, engine: Engine) -> None:
    result = run(runner, engine, m.COUNTER)
    assert result.ok
    assert 0 < result.metrics.fuel_used < 100
    assert result.metrics.duration_us > 0
    assert result.metrics.peak_memory_bytes == 2 * 65536  # its page + one for the input


def test_output_of_exactly_the_limit_is_accepted(runner: Runner, engine: Engine) -> None:
    document = b'{"a":"' + b"a" * (m.OUTPUT_LIMIT - 8) + b'"}'
    assert len(document) == m.OUTPUT_LIMIT
    result = run(runner, engine, m.static_output(document))
    assert result.ok, result.failure


def test_no_state_survives_between_runs(runner: Runner, engine: Engine) -> None:
    runnable = load(engine, m.COUNTER)
    for _ in range(5):
        result = runner.run(runnable, ENVELOPE)
        assert result.output is not None
        assert result.output.data == {"global": 1, "memory": 1}


def test_memory_growth_past_the_limit_returns_minus_one(runner: Runner, engine: Engine) -> None:
    result = run(runner, engine, m.HUGE_GROW_REFUSED)
    assert result.output is not None and result.output.data == {"refused": True}


# ---------------------------------------------------------------------------- hostile suite

HOSTILE = [
    pytest.param(
        m.LOOP_IN_EXECUTE, FailureReason.FUEL_EXHAUSTED, "execute", 0.5, id="loop-execute"
    ),
    pytest.param(
        m.LOOP_IN_START, FailureReason.FUEL_EXHAUSTED, "instantiation", 0.5, id="loop-start"
    ),
    pytest.param(m.LOOP_IN_ALLOC, FailureReason.FUEL_EXHAUSTED, "alloc", 0.5, id="loop-alloc"),
    pytest.param(m.MEMORY_FILL_LOOP, FailureReason.FUEL_EXHAUSTED, "fuel", 0.5, id="fill-loop"),
    pytest.param(
        m.MEMORY_GROW_LOOP, FailureReason.DEADLINE_EXCEEDED, "1 s deadline", 2.0, id="mem-grow"
    ),
    pytest.param(m.DEEP_RECURSION, FailureReason.STACK_OVERFLOW, "512 KiB", 0.5, id="recursion"),
    pytest.param(m.MEMORY_GROW_BOMB, FailureReason.MEMORY_LIMIT, "limit", 0.5, id="grow-bomb"),
    pytest.param(m.DATA_OUT_OF_BOUNDS, FailureReason.MEMORY_LIMIT, "data segment", 0.5, id="data"),
    pytest.param(m.NO_NUL, FailureReason.INVALID_OUTPUT, "NUL-terminated", 0.5, id="no-nul"),
    pytest.param(m.OVERSIZED_OUTPUT, FailureReason.OUTPUT_TOO_LARGE, "262144", 0.5, id="big-out"),
    pytest.param(m.returns_pointer(0), FailureReason.REJECTED, "returned 0", 0.5, id="zero"),
    pytest.param(m.returns_pointer(-1), FailureReason.INVALID_OUTPUT, "0xffffffff", 0.5, id="neg"),
    pytest.param(
        m.returns_pointer(-65536), FailureReason.INVALID_OUTPUT, "outside", 0.5, id="neg-page"
    ),
    pytest.param(
        m.returns_pointer(65536), FailureReason.INVALID_OUTPUT, "outside", 0.5, id="at-end"
    ),
    pytest.param(
        m.returns_pointer(0x7FFFFFFF), FailureReason.INVALID_OUTPUT, "outside", 0.5, id="far"
    ),
    pytest.param(
        m.ALLOC_RETURNS.format(pointer=-16), FailureReason.TRAP, "alloc(", 0.5, id="alloc-neg"
    ),
    pytest.param(
        m.ALLOC_RETURNS.format(pointer=65530), FailureReason.TRAP, "outside", 0.5, id="alloc-edge"
    ),
    pytest.param(
        m.ALLOC_RETURNS.format(pointer=0),
        FailureReason.MEMORY_LIMIT,
        "returned 0",
        0.5,
        id="alloc-zero",
    ),
    pytest.param(
        m.static_output(b'{"a":"\xff"}'), FailureReason.INVALID_OUTPUT, "UTF-8", 0.5, id="utf8"
    ),
    pytest.param(
        m.static_output(b'{"a":'), FailureReason.INVALID_OUTPUT, "not valid JSON", 0.5, id="json"
    ),
    pytest.param(
        m.static_output(b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        FailureReason.INVALID_OUTPUT,
        "nested deeper",
        0.5,
        id="deep-json",
    ),
    pytest.param(
        m.static_output(b'{"n":1e99999}'),
        FailureReason.INVALID_OUTPUT,
        "number",
        0.5,
        id="huge-float",
    ),
    pytest.param(
        m.static_output(b'{"n":' + b"7" * 100_000 + b"}"),
        FailureReason.INVALID_OUTPUT,
        "digits",
        0.5,
        id="huge-int",
    ),
    pytest.param(
        m.static_output(b"[1,2,3]"), FailureReason.INVALID_OUTPUT, "JSON object", 0.5, id="array"
    ),
    pytest.param(
        m.static_output(b'{"projection":{"name":"p","entity_type":"order"}}'),
        FailureReason.INVALID_OUTPUT,
        "projection.entity_id",
        0.5,
        id="half-key",
    ),
    pytest.param(
        m.static_output(b'{"derived_event":{"type":"X","payload":{}}}'),
        FailureReason.INVALID_OUTPUT,
        "derived_event.type",
        0.5,
        id="event-type",
    ),
    pytest.param(
        m.static_output(b'{"a":"\\u0000"}'), FailureReason.INVALID_OUTPUT, "NUL", 0.5, id="u0000"
    ),
    pytest.param(m.OUT_OF_BOUNDS_STORE, FailureReason.TRAP, "out of bounds", 0.5, id="oob-store"),
    pytest.param(m.DIVIDE_BY_ZERO, FailureReason.TRAP, "divide by zero", 0.5, id="div-zero"),
    pytest.param(m.NULL_INDIRECT_CALL, FailureReason.TRAP, "uninitialized", 0.5, id="null-call"),
]


@pytest.mark.parametrize(("wat", "reason", "needle", "seconds"), HOSTILE)
def test_hostile_module_fails_typed_and_fast(
    runner: Runner, engine: Engine, wat: str, reason: FailureReason, needle: str, seconds: float
) -> None:
    runnable = load(engine, wat)
    started = time.monotonic()
    result = runner.run(runnable, ENVELOPE)
    elapsed = time.monotonic() - started
    assert needle in failed(result, reason)
    assert elapsed < seconds
    # The host is unharmed and the next run starts clean.
    after = run(runner, engine, m.COUNTER)
    assert after.output is not None and after.output.data == {"global": 1, "memory": 1}


def test_fuel_exhaustion_reports_the_whole_budget(runner: Runner, engine: Engine) -> None:
    result = run(runner, engine, m.LOOP_IN_EXECUTE)
    failed(result, FailureReason.FUEL_EXHAUSTED)
    assert result.metrics.fuel_used == DEFAULT_LIMITS.fuel


def test_grow_bomb_reports_peak_memory_at_the_limit(runner: Runner, engine: Engine) -> None:
    result = run(runner, engine, m.MEMORY_GROW_BOMB)
    failed(result, FailureReason.MEMORY_LIMIT)
    assert result.metrics.peak_memory_bytes == 10 * MiB


def test_memory_grow_loop_is_stopped_by_the_deadline_not_fuel(
    runner: Runner, engine: Engine
) -> None:
    started = time.monotonic()
    result = run(runner, engine, m.MEMORY_GROW_LOOP)
    elapsed = time.monotonic() - started
    failed(result, FailureReason.DEADLINE_EXCEEDED)
    assert 0.9 <= elapsed < 2.0


def test_table_grow_loop_ends_on_fuel_or_the_deadline(runner: Runner, engine: Engine) -> None:
    # A failing table.grow costs 2 fuel units and ~15 ns: 50M fuel lasts 0.5-0.9 s
    # here, so whichever of fuel and the 1 s deadline comes first stops it.
    started = time.monotonic()
    result = run(runner, engine, m.TABLE_GROW_LOOP)
    elapsed = time.monotonic() - started
    assert result.failure is not None
    assert result.failure.reason in (
        FailureReason.FUEL_EXHAUSTED,
        FailureReason.DEADLINE_EXCEEDED,
    )
    assert elapsed < 1.5


def counting_loop(iterations: int) -> str:
    return f"""
    (module
      (memory (export "memory") 1)
      {m.ALLOC_AT_16}
      (func (export "execute") (param i32 i32) (result i32) (local $i i32)
        (loop $again
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $again (i32.lt_u (local.get $i) (i32.const {iterations}))))
        (i32.const 0)))
    """


def test_fuel_used_is_exact_for_a_completed_run(runner: Runner, engine: Engine) -> None:
    short = run(runner, engine, counting_loop(100_000)).metrics.fuel_used
    long = run(runner, engine, counting_loop(200_000)).metrics.fuel_used
    assert long - short == 100_000 * 8  # 8 fuel-consuming instructions per iteration


@pytest.mark.parametrize("wat", [m.LOOP_IN_EXECUTE, m.MEMORY_GROW_LOOP, m.TABLE_GROW_LOOP])
def test_deadline_backstop_holds_whatever_the_fuel(engine: Engine, wat: str) -> None:
    # With fuel out of the way, only the epoch deadline can stop these.
    unmetered = Runner(engine, Limits(fuel=10**15))
    started = time.monotonic()
    result = unmetered.run(load(engine, wat), ENVELOPE)
    elapsed = time.monotonic() - started
    failed(result, FailureReason.DEADLINE_EXCEEDED)
    assert 0.9 <= elapsed < 2.0


def test_no_room_for_the_input_is_a_memory_limit(runner: Runner, engine: Engine) -> None:
    # Initial memory is the whole 10 MiB, so the host cannot grow it for the input.
    message = failed(run(runner, engine, m.FULL_MEMORY), FailureReason.MEMORY_LIMIT)
    assert "input" in message


def test_input_larger_than_memory_is_refused_before_instantiating(
    runner: Runner, engine: Engine
) -> None:
    huge = b'{"payload":"' + b"x" * (11 * MiB) + b'"}'
    result = run(runner, engine, m.ECHO, huge)
    failed(result, FailureReason.MEMORY_LIMIT)
    assert result.metrics.fuel_used == 0


def test_output_one_byte_over_the_limit(runner: Runner, engine: Engine) -> None:
    document = b'{"a":"' + b"a" * (m.OUTPUT_LIMIT - 7) + b'"}'
    result = run(runner, engine, m.static_output(document))
    failed(result, FailureReason.OUTPUT_TOO_LARGE)


def test_output_running_into_the_end_of_memory(runner: Runner, engine: Engine) -> None:
    # The last byte of memory is the output's first: no NUL before the end.
    wat = m.static_output(b"x", offset=65535, pages=1).replace('"x\\00"', '"x"')
    result = run(runner, engine, wat)
    failed(result, FailureReason.INVALID_OUTPUT)


def test_failures_never_echo_the_input(runner: Runner, engine: Engine) -> None:
    # The echo module returns the envelope itself; make it invalid so it fails.
    envelope = b'{"secrets":{"K":"' + SECRET.encode() + b'"}, "broken": }'
    result = run(runner, engine, m.ECHO, envelope)
    failed(result, FailureReason.INVALID_OUTPUT)
