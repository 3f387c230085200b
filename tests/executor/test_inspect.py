"""Upload checks: what `compile_in_process` refuses, and why (the subprocess wrapper is
tested in test_compile.py; the same checks run inside it)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from wasmtime import Engine

from services.executor.sandbox.compile import compile_in_process
from services.executor.sandbox.engine import new_engine
from services.executor.sandbox.inspect import scan_binary
from services.executor.sandbox.limits import Limits
from services.executor.sandbox.result import ModuleRejected, RejectionKind

from . import modules as m


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    yield new_engine()


def rejected(wasm: bytes, engine: Engine) -> ModuleRejected:
    with pytest.raises(ModuleRejected) as caught:
        compile_in_process(wasm, engine=engine)
    return caught.value


def test_a_conforming_module_compiles(engine: Engine) -> None:
    compiled = compile_in_process(m.wasm(m.ECHO_ALLOC), engine=engine)
    assert compiled.has_alloc
    assert len(compiled.sha256) == 64 and compiled.artifact
    assert not compile_in_process(m.wasm(m.ECHO), engine=engine).has_alloc


@pytest.mark.parametrize(
    ("wat", "needle"),
    [
        (m.IMPORTS_FUNCTION, "imports env.log"),
        (m.IMPORTS_MEMORY, "imports env.memory"),
        (m.IMPORTS_GLOBAL, "imports wasi_snapshot_preview1.clock"),
        (m.with_execute("(param i32) (result i32)", "(i32.const 0)"), "(i32) -> i32"),
        (m.with_execute("(param i64 i64) (result i32)", "(i32.const 0)"), "(i64, i64) -> i32"),
        (m.with_execute("(param i32 i32)"), "(i32, i32) -> ()"),
        (m.with_execute("(param i32 i32) (result i64)", "(i64.const 0)"), "-> i64"),
        (m.with_execute("(param i32 i32) (result i32 i32)", "(i32.const 0) (i32.const 0)"), ""),
        (m.EXECUTE_IS_GLOBAL, "execute(i32, i32) -> i32"),
        (m.NO_EXECUTE, "execute(i32, i32) -> i32"),
        (m.MEMORY_NOT_EXPORTED, "export its memory as `memory`"),
        (m.MEMORY_WRONG_NAME, "export its memory as `memory`"),
        (m.NO_MEMORY, "defines 0 memories"),
        (m.TWO_MEMORIES, "defines 2 memories"),
        (m.TWO_TABLES, "defines 2 tables"),
        (m.SHARED_MEMORY, "shared memories"),
        (m.MEMORY64, "64-bit memories"),
        (m.ALLOC_WRONG_TYPE, "`alloc` must be a function of type (i32) -> i32, not (i64)"),
        (m.ALLOC_IS_MEMORY_SIZED_GLOBAL, "`alloc` must be a function"),
        (m.many_exports(63), "65 exports; at most 64"),
    ],
)
def test_abi_violations_are_refused_with_a_reason(wat: str, needle: str, engine: Engine) -> None:
    error = rejected(m.wasm(wat), engine)
    assert error.kind is RejectionKind.ABI
    assert needle in error.reason


def test_exactly_64_exports_are_allowed(engine: Engine) -> None:
    compile_in_process(m.wasm(m.many_exports(62)), engine=engine)  # + memory + execute


@pytest.mark.parametrize(
    ("wat", "needle"),
    [
        (m.OVERSIZED_MEMORY, "initial memory is 161 pages"),
        (m.TABLE_WITHOUT_MAXIMUM, "declared: none"),
        (m.TABLE_TOO_LARGE, "declared: 20000"),
    ],
)
def test_limit_violations_are_refused(wat: str, needle: str, engine: Engine) -> None:
    error = rejected(m.wasm(wat), engine)
    assert error.kind is RejectionKind.LIMITS
    assert needle in error.reason


def test_memory_exactly_at_the_limit_is_allowed(engine: Engine) -> None:
    compile_in_process(m.wasm(m.FULL_MEMORY), engine=engine)


def test_hundred_thousand_exports_are_refused_before_compiling() -> None:
    wasm = m.wasm(m.many_exports(100_000))
    started = time.monotonic()
    with pytest.raises(ModuleRejected) as caught:
        scan_binary(wasm)
    assert caught.value.kind is RejectionKind.ABI
    assert "100002 exports" in caught.value.reason
    assert time.monotonic() - started < 0.5


def leb128(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


@pytest.mark.parametrize(("section", "what"), [(4, "tables"), (5, "memories")])
def test_huge_table_or_memory_counts_are_refused_from_the_count(section: int, what: str) -> None:
    count = leb128(2_000_000)
    wasm = b"\x00asm\x01\x00\x00\x00" + bytes([section, len(count)]) + count
    started = time.monotonic()
    with pytest.raises(ModuleRejected) as caught:
        scan_binary(wasm)
    assert f"defines 2000000 {what}" in caught.value.reason
    assert time.monotonic() - started < 0.1


@pytest.mark.parametrize(
    ("wasm", "kind", "needle"),
    [
        (b"", RejectionKind.NOT_WASM, "empty"),
        (b"hello world", RejectionKind.NOT_WASM, "magic"),
        (b"\x00asm", RejectionKind.NOT_WASM, "version"),
        (b"\x00asm\x02\x00\x00\x00", RejectionKind.NOT_WASM, "version"),
        (b"\x00asm\x0d\x00\x01\x00", RejectionKind.NOT_WASM, "components"),
        (b"\x00asm\x01\x00\x00\x00\x05\x7f", RejectionKind.INVALID, "past the end"),
        (b"\x00asm\x01\x00\x00\x00\x05", RejectionKind.INVALID, "truncated"),
        (b"\x00asm\x01\x00\x00\x00\x63\x00", RejectionKind.INVALID, "unknown section"),
        (b"\x00asm\x01\x00\x00\x00\x05\x01\xff", RejectionKind.INVALID, "truncated"),
    ],
)
def test_malformed_binaries(wasm: bytes, kind: RejectionKind, needle: str, engine: Engine) -> None:
    error = rejected(wasm, engine)
    assert error.kind is kind
    assert needle in error.reason


def test_truncated_module_is_invalid(engine: Engine) -> None:
    whole = m.wasm(m.ECHO)
    error = rejected(whole[: len(whole) - 3], engine)
    assert error.kind is RejectionKind.INVALID


def test_type_errors_are_reported_by_the_compiler(engine: Engine) -> None:
    error = rejected(m.wasm(m.TYPE_ERROR), engine)
    assert error.kind is RejectionKind.INVALID
    assert "type mismatch" in error.reason


def test_oversized_module_is_refused_before_anything_else() -> None:
    limits = Limits()
    with pytest.raises(ModuleRejected) as caught:
        scan_binary(b"\x00asm\x01\x00\x00\x00" + b"\x00" * limits.module_bytes)
    assert caught.value.kind is RejectionKind.TOO_LARGE


@pytest.mark.parametrize(
    ("wat", "needle"),
    [
        (m.DATA_OUT_OF_BOUNDS, "MEMORY_LIMIT"),
        (m.LOOP_IN_START, "FUEL_EXHAUSTED"),
        (m.TRAP_IN_START, "unreachable"),
    ],
)
def test_modules_that_cannot_instantiate_are_refused(wat: str, needle: str, engine: Engine) -> None:
    # Instantiation is deterministic (no imports), so this module would fail every run.
    error = rejected(m.wasm(wat), engine)
    assert error.kind is RejectionKind.INSTANTIATION
    assert needle in error.reason
