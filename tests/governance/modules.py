"""Small WebAssembly modules for governance and executor tests (WAT, compiled here)."""

from __future__ import annotations

import json

import wasmtime

# Returns its input envelope as its output, so a test sees exactly what the
# guest was given (payload, injected secrets, permissions, action name).
ECHO = """
(module
  (memory (export "memory") 1)
  (global $next (mut i32) (i32.const 1024))
  (func (export "alloc") (param $len i32) (result i32)
    (local $at i32) (local $end i32)
    (local.set $at (global.get $next))
    (local.set $end (i32.add (local.get $at) (i32.add (local.get $len) (i32.const 1))))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.lt_s (memory.grow
                  (i32.add (i32.shr_u (local.get $end) (i32.const 16)) (i32.const 1)))
                  (i32.const 0))
              (then (unreachable)))))
    (global.set $next (local.get $end))
    (local.get $at))
  (func (export "execute") (param $ptr i32) (param $len i32) (result i32)
    (i32.store8 (i32.add (local.get $ptr) (local.get $len)) (i32.const 0))
    (local.get $ptr)))
"""

IMPORTS_A_FUNCTION = """
(module
  (import "env" "now" (func $now (result i64)))
  (memory (export "memory") 1)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

NO_MEMORY = """
(module (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""


def constant(output: dict[str, object] | str) -> str:
    """A module whose execute returns this fixed document."""
    text = output if isinstance(output, str) else json.dumps(output)
    escaped = "".join(f"\\{b:02x}" for b in text.encode()) + "\\00"
    return f"""
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "{escaped}")
  (func (export "execute") (param i32 i32) (result i32) (i32.const 16)))
"""


def wasm(wat: str) -> bytes:
    return bytes(wasmtime.wat2wasm(wat))


def variant(wat: str, n: int) -> bytes:
    """The same behaviour with different bytes (a custom global), for new versions."""
    return wasm(
        wat.replace("(memory (export", f"(global $v{n} i32 (i32.const {n}))\n  (memory (export", 1)
    )
