"""Artifacts reach `Module.deserialize` only through a verified seal."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from wasmtime import Engine, Module

from services.executor.sandbox.compile import CompiledModule, compile_in_process
from services.executor.sandbox.engine import EpochTicker, new_engine
from services.executor.sandbox.limits import DEFAULT_LIMITS, Limits, MiB
from services.executor.sandbox.result import ArtifactError, SealError
from services.executor.sandbox.run import Runner, load_runnable
from services.executor.sandbox.seal import seal, unseal

from . import modules as m

KEY = os.urandom(32)


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    engine = new_engine()
    with EpochTicker(engine, DEFAULT_LIMITS.epoch_tick_seconds):
        yield engine


@pytest.fixture(scope="module")
def compiled(engine: Engine) -> CompiledModule:
    return compile_in_process(m.wasm(m.ECHO), engine=engine)


def test_round_trip(compiled: CompiledModule) -> None:
    sealed = seal(compiled.artifact, KEY, context=compiled.sha256)
    assert unseal(sealed, KEY, context=compiled.sha256) == compiled.artifact


def test_a_sealed_artifact_loads_and_runs(engine: Engine, compiled: CompiledModule) -> None:
    sealed = seal(compiled.artifact, KEY, context=compiled.sha256)
    runnable = load_runnable(engine, sealed, KEY, sha256=compiled.sha256)
    result = Runner(engine).run(runnable, b'{"payload":{}}')
    assert result.output is not None and result.output.data == {"payload": {}}


@pytest.mark.parametrize("position", [0, 8, 20, 40, -1])
def test_any_flipped_byte_is_refused(
    engine: Engine, compiled: CompiledModule, position: int
) -> None:
    sealed = bytearray(seal(compiled.artifact, KEY, context=compiled.sha256))
    sealed[position] ^= 0x01
    with pytest.raises(SealError):
        load_runnable(engine, bytes(sealed), KEY, sha256=compiled.sha256)


def test_wrong_key_is_refused(compiled: CompiledModule) -> None:
    sealed = seal(compiled.artifact, KEY, context=compiled.sha256)
    with pytest.raises(SealError):
        unseal(sealed, os.urandom(32), context=compiled.sha256)


def test_artifact_swapped_to_another_module_is_refused(compiled: CompiledModule) -> None:
    # A valid artifact stored under another module's hash must not load as that module.
    sealed = seal(compiled.artifact, KEY, context=compiled.sha256)
    with pytest.raises(SealError):
        unseal(sealed, KEY, context="0" * 64)


@pytest.mark.parametrize("sealed", [b"", b"EFSEAL1\x00", b"not sealed at all" * 10])
def test_garbage_is_refused(sealed: bytes) -> None:
    with pytest.raises(SealError):
        unseal(sealed, KEY)


def test_raw_artifact_is_refused(compiled: CompiledModule) -> None:
    with pytest.raises(SealError):
        unseal(compiled.artifact, KEY)


def test_short_keys_are_a_programming_error(compiled: CompiledModule) -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        seal(compiled.artifact, b"short")


def test_artifact_from_a_differently_configured_engine_is_an_artifact_error(
    engine: Engine,
) -> None:
    other = new_engine(Limits(memory_guard_bytes=4 * MiB))
    artifact = bytes(Module(other, m.ECHO).serialize())
    sealed = seal(artifact, KEY, context="x")
    with pytest.raises(ArtifactError, match="does not load"):
        load_runnable(engine, sealed, KEY, sha256="x")


def test_sealed_artifact_violating_the_abi_is_refused_at_load(engine: Engine) -> None:
    # Even correctly sealed bytes are re-checked: e.g. an artifact compiled by
    # an older, laxer build that let `alloc` have the wrong type.
    artifact = bytes(Module(engine, m.ALLOC_WRONG_TYPE).serialize())
    sealed = seal(artifact, KEY, context="y")
    with pytest.raises(ArtifactError, match="alloc"):
        load_runnable(engine, sealed, KEY, sha256="y")


def test_seal_error_messages_do_not_carry_the_artifact(compiled: CompiledModule) -> None:
    with pytest.raises(SealError) as caught:
        unseal(b"EFSEAL1\x00" + b"\x00" * 32 + json.dumps({"k": "v"}).encode(), KEY)
    assert '"k"' not in str(caught.value)
