"""Hand-written WAT modules for the sandbox tests: well-behaved guests and hostile ones."""

from __future__ import annotations

from wasmtime import wat2wasm

OUTPUT_LIMIT = 256 * 1024


ALLOC_AT_16 = '(func (export "alloc") (param i32) (result i32) (i32.const 16))'
"""An `alloc` that keeps the input in the first page, so memory never grows for it."""


def wasm(wat: str) -> bytes:
    return bytes(wat2wasm(wat))


def wat_bytes(raw: bytes) -> str:
    """`raw` as a WAT string literal body: printable ASCII kept, everything else escaped."""
    out = []
    for byte in raw:
        if 0x20 <= byte < 0x7F and byte not in (0x22, 0x5C):
            out.append(chr(byte))
        else:
            out.append(f"\\{byte:02x}")
    return "".join(out)


def static_output(raw: bytes, *, pages: int = 1, offset: int = 1024, alloc: bool = False) -> str:
    """A guest whose `execute` returns `raw` (then NUL) from a data segment, whatever the input."""
    needed = -(-(offset + len(raw) + 1) // 65536)
    alloc_func = ALLOC_AT_16 if alloc else ""
    return f"""
    (module
      (memory (export "memory") {max(pages, needed)})
      (data (i32.const {offset}) "{wat_bytes(raw)}\\00")
      {alloc_func}
      (func (export "execute") (param i32 i32) (result i32) (i32.const {offset})))
    """


def returns_pointer(pointer: int, *, pages: int = 1) -> str:
    """`execute` returns a fixed (possibly hostile) pointer; memory stays `pages` long."""
    return f"""
    (module
      (memory (export "memory") {pages})
      {ALLOC_AT_16}
      (func (export "execute") (param i32 i32) (result i32) (i32.const {pointer})))
    """


ECHO = """
(module
  (memory (export "memory") 1)
  ;; The host grew memory and wrote the input at the new pages; echo it back.
  (func (export "execute") (param $ptr i32) (param $len i32) (result i32)
    (i32.store8 (i32.add (local.get $ptr) (local.get $len)) (i32.const 0))
    (local.get $ptr)))
"""

ECHO_ALLOC = """
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 4096))
  ;; A bump allocator that grows memory when needed (so memory may grow in alloc).
  (func (export "alloc") (param $len i32) (result i32)
    (local $ptr i32) (local $end i32)
    (local.set $ptr (global.get $heap))
    (local.set $end (i32.add (local.get $ptr) (i32.add (local.get $len) (i32.const 1))))
    (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq (memory.grow
                      (i32.add (i32.div_u (i32.sub (local.get $end)
                                                   (i32.mul (memory.size) (i32.const 65536)))
                                          (i32.const 65536))
                               (i32.const 1)))
                    (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $ptr))
  (func (export "execute") (param $ptr i32) (param $len i32) (result i32)
    (i32.store8 (i32.add (local.get $ptr) (local.get $len)) (i32.const 0))
    (local.get $ptr)))
"""

COUNTER = r"""
(module
  (memory (export "memory") 1)
  (global $runs (mut i32) (i32.const 0))
  (data (i32.const 100) "\00")
  (data (i32.const 200) "{\"global\":0,\"memory\":0}\00")
  ;; Increments a global and a memory cell, and reports both: a reused
  ;; instance would answer 2, 3, ... instead of 1.
  (func (export "execute") (param i32 i32) (result i32)
    (global.set $runs (i32.add (global.get $runs) (i32.const 1)))
    (i32.store8 (i32.const 100) (i32.add (i32.load8_u (i32.const 100)) (i32.const 1)))
    (i32.store8 (i32.const 210) (i32.add (i32.const 48) (global.get $runs)))
    (i32.store8 (i32.const 221) (i32.add (i32.const 48) (i32.load8_u (i32.const 100))))
    (i32.const 200)))
"""

OUTPUT_IN_GROWN_MEMORY = r"""
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"grown\":true}\00")
  ;; Grows memory during execute and returns a pointer into the new pages,
  ;; so the host must re-read the memory size after the call.
  (func (export "execute") (param i32 i32) (result i32)
    (local $at i32)
    (local.set $at (i32.mul (memory.grow (i32.const 2)) (i32.const 65536)))
    (memory.copy (i32.add (local.get $at) (i32.const 70000)) (i32.const 16) (i32.const 15))
    (i32.add (local.get $at) (i32.const 70000))))
"""

LOOP_IN_EXECUTE = """
(module
  (memory (export "memory") 1)
  (func (export "execute") (param i32 i32) (result i32) (loop $spin (br $spin)) (i32.const 0)))
"""

LOOP_IN_START = """
(module
  (memory (export "memory") 1)
  (func $start (loop $spin (br $spin)))
  (start $start)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

LOOP_IN_ALLOC = """
(module
  (memory (export "memory") 1)
  (func (export "alloc") (param i32) (result i32) (loop $spin (br $spin)) (i32.const 16))
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

TRAP_IN_START = """
(module
  (memory (export "memory") 1)
  (func $start unreachable)
  (start $start)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""


def _chain(operation: str, depth: int, seed: str) -> str:
    expression = seed
    for _ in range(depth):
        expression = f"({operation} {expression})"
    return expression


# Each failing grow feeds the next its -1, so a grow costs one unit of fuel:
# ~1.8 s of work for 50M fuel on this machine, so the 1 s deadline fires first.
MEMORY_GROW_LOOP = f"""
(module
  (memory (export "memory") 1)
  (func (export "execute") (param i32 i32) (result i32)
    (loop $again (drop {_chain("memory.grow", 64, "(i32.const -1)")}) (br $again))
    (i32.const 0)))
"""

TABLE_GROW_LOOP = f"""
(module
  (memory (export "memory") 1)
  (table 1 10 funcref)
  (func (export "execute") (param i32 i32) (result i32)
    (loop $again (drop {_chain("table.grow (ref.null func)", 64, "(i32.const -1)")})
                 (br $again))
    (i32.const 0)))
"""

DEEP_RECURSION = """
(module
  (memory (export "memory") 1)
  (func $down (param i32) (result i32)
    (i32.add (call $down (i32.add (local.get 0) (i32.const 1))) (i32.const 1)))
  (func (export "execute") (param i32 i32) (result i32) (call $down (i32.const 0))))
"""

MEMORY_GROW_BOMB = """
(module
  (memory (export "memory") 1)
  ;; Grow a page at a time until refused, then die the way an allocator does.
  (func (export "execute") (param i32 i32) (result i32)
    (loop $more (br_if $more (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
    unreachable))
"""

HUGE_GROW_REFUSED = r"""
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"refused\":true}\00")
  (data (i32.const 64) "{\"refused\":false}\00")
  ;; memory.grow past the limit must return -1, not trap.
  (func (export "execute") (param i32 i32) (result i32)
    (if (result i32) (i32.eq (memory.grow (i32.const 1000)) (i32.const -1))
      (then (i32.const 16)) (else (i32.const 64)))))
"""

OVERSIZED_MEMORY = """
(module
  (memory (export "memory") 161)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

FULL_MEMORY = r"""
(module
  (memory (export "memory") 160)
  (data (i32.const 16) "{\"ok\":true}\00")
  (func (export "execute") (param i32 i32) (result i32) (i32.const 16)))
"""

DATA_OUT_OF_BOUNDS = """
(module
  (memory (export "memory") 1)
  (data (i32.const 65534) "abcd")
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

NO_NUL = f"""
(module
  (memory (export "memory") 1)
  {ALLOC_AT_16}
  ;; Fill from 1024 to the end of memory with 'a': no terminator anywhere.
  (func (export "execute") (param i32 i32) (result i32)
    (memory.fill (i32.const 1024) (i32.const 97) (i32.const 64512))
    (i32.const 1024)))
"""

OVERSIZED_OUTPUT = """
(module
  (memory (export "memory") 8)
  ;; 300 KiB of 'a', then a NUL: terminated, but past the output limit.
  (func (export "execute") (param i32 i32) (result i32)
    (memory.fill (i32.const 16) (i32.const 97) (i32.const 307200))
    (i32.store8 (i32.const 307216) (i32.const 0))
    (i32.const 16)))
"""

ALLOC_RETURNS = """
(module
  (memory (export "memory") 1)
  (func (export "alloc") (param i32) (result i32) (i32.const {pointer}))
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

OUT_OF_BOUNDS_STORE = """
(module
  (memory (export "memory") 1)
  (func (export "execute") (param i32 i32) (result i32)
    (i32.store (i32.const 0x40000000) (i32.const 1))
    (i32.const 0)))
"""

DIVIDE_BY_ZERO = """
(module
  (memory (export "memory") 1)
  (func (export "execute") (param i32 i32) (result i32)
    (i32.div_u (i32.const 1) (i32.sub (local.get 1) (local.get 1)))))
"""

NULL_INDIRECT_CALL = """
(module
  (memory (export "memory") 1)
  (type $t (func (result i32)))
  (table 4 4 funcref)
  (func (export "execute") (param i32 i32) (result i32)
    (call_indirect (type $t) (i32.const 2))))
"""

MEMORY_FILL_LOOP = f"""
(module
  (memory (export "memory") 160)
  {ALLOC_AT_16}
  ;; Bulk operations on all 10 MiB, forever: priced per byte, stopped by fuel.
  (func (export "execute") (param i32 i32) (result i32)
    (loop $again
      (memory.fill (i32.const 0) (i32.const 1) (i32.const 10485760))
      (br $again))
    (i32.const 0)))
"""

# ---------------------------------------------------------------- refused at upload

IMPORTS_FUNCTION = """
(module
  (import "env" "log" (func $log (param i32)))
  (memory (export "memory") 1)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

IMPORTS_MEMORY = """
(module
  (import "env" "memory" (memory 1))
  (export "memory" (memory 0))
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

IMPORTS_GLOBAL = """
(module
  (import "wasi_snapshot_preview1" "clock" (global i32))
  (memory (export "memory") 1)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""


def with_execute(signature: str, body: str = "") -> str:
    return f"""
    (module
      (memory (export "memory") 1)
      (func (export "execute") {signature} {body}))
    """


EXECUTE_IS_GLOBAL = """
(module
  (memory (export "memory") 1)
  (global (export "execute") i32 (i32.const 0)))
"""

NO_EXECUTE = """
(module
  (memory (export "memory") 1)
  (func (export "run") (param i32 i32) (result i32) (i32.const 0)))
"""

MEMORY_NOT_EXPORTED = """
(module
  (memory 1)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

MEMORY_WRONG_NAME = """
(module
  (memory (export "mem") 1)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

NO_MEMORY = """
(module
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

TWO_MEMORIES = """
(module
  (memory (export "memory") 1)
  (memory 1)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

TWO_TABLES = """
(module
  (memory (export "memory") 1)
  (table 1 1 funcref)
  (table 1 1 funcref)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

TABLE_WITHOUT_MAXIMUM = """
(module
  (memory (export "memory") 1)
  (table 1 funcref)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

TABLE_TOO_LARGE = """
(module
  (memory (export "memory") 1)
  (table 1 20000 funcref)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

SHARED_MEMORY = """
(module
  (memory (export "memory") 1 1 shared)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

MEMORY64 = """
(module
  (memory (export "memory") i64 1)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

ALLOC_WRONG_TYPE = """
(module
  (memory (export "memory") 1)
  (func (export "alloc") (param i64) (result i64) (i64.const 16))
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

ALLOC_IS_MEMORY_SIZED_GLOBAL = """
(module
  (memory (export "memory") 1)
  (global (export "alloc") i32 (i32.const 16))
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))
"""

TYPE_ERROR = """
(module
  (memory (export "memory") 1)
  (func (export "execute") (param i32 i32) (result i32) (i64.const 0)))
"""


def many_exports(count: int) -> str:
    names = " ".join(f'(export "e{i}" (func $f))' for i in range(count))
    return f"""
    (module
      (memory (export "memory") 1)
      (func $f (param i32 i32) (result i32) (i32.const 0))
      (export "execute" (func $f))
      {names})
    """


def compile_bomb(depth: int) -> str:
    """`depth` nested loops, each branching to a different outer one.

    15k levels are 120 KB of wasm that take Cranelift ~30 s and, at 5k
    levels, already ~1 GiB to compile (quadratic in the nesting).
    """
    opens = "".join(f"loop (br_if {i} (local.get 0)) " for i in range(depth))
    return f"""
    (module
      (memory (export "memory") 1)
      (func (export "execute") (param i32 i32) (result i32)
        {opens}{"end " * depth}(i32.const 0)))
    """
