"""The narrow raw-FFI layer the per-run path uses instead of wasmtime-py's wrappers.

Why: the high-level API costs ~150 µs per run here, the raw path ~30 µs.
The wrappers re-read a function's type on every call, build every export
of an instance to find one (`Instance.exports()` is quadratic), and give
memory access with Python slice semantics (negative offsets wrap). This
module looks exports up by name, calls i32 functions with preallocated
argument arrays, and reads linear memory only within explicit bounds.

It relies on `wasmtime._ffi`, which is private: wasmtime is pinned
(==50.0.1) and tests/executor exercises every function here, so an upgrade
that changes it fails loudly. Private ctypes prototypes are built with
`dll[name]` so changing their restype cannot disturb the ones wasmtime-py
uses itself.

Lifetime rule: every pointer here belongs to a store; callers free the store
(`store_delete`) only after they have copied out everything they need.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, byref, c_int, c_size_t, c_uint64, c_void_p

from wasmtime import Trap, WasmtimeError
from wasmtime import _ffi as ffi

_libc = ctypes.CDLL(None)
_memchr = _libc.memchr
_memchr.argtypes = [c_void_p, c_int, c_size_t]
_memchr.restype = c_void_p

_store_new = ffi.dll["wasmtime_store_new"]
_store_new.argtypes = [POINTER(ffi.wasm_engine_t), c_void_p, c_void_p]
_store_new.restype = c_void_p
_store_context = ffi.dll["wasmtime_store_context"]
_store_context.argtypes = [c_void_p]
_store_context.restype = c_void_p
_store_delete = ffi.dll["wasmtime_store_delete"]
_store_delete.argtypes = [c_void_p]
_store_delete.restype = None
_store_limiter = ffi.dll["wasmtime_store_limiter"]
_store_limiter.argtypes = [
    c_void_p,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_int64,
]
_store_limiter.restype = None
_set_fuel = ffi.dll["wasmtime_context_set_fuel"]
_set_fuel.argtypes = [c_void_p, c_uint64]
_set_fuel.restype = POINTER(ffi.wasmtime_error_t)
_get_fuel = ffi.dll["wasmtime_context_get_fuel"]
_get_fuel.argtypes = [c_void_p, POINTER(c_uint64)]
_get_fuel.restype = POINTER(ffi.wasmtime_error_t)
_set_epoch_deadline = ffi.dll["wasmtime_context_set_epoch_deadline"]
_set_epoch_deadline.argtypes = [c_void_p, c_uint64]
_set_epoch_deadline.restype = None
_instance_new = ffi.dll["wasmtime_instance_new"]
_instance_new.argtypes = [
    c_void_p,
    POINTER(ffi.wasmtime_module_t),
    c_void_p,
    c_size_t,
    POINTER(ffi.wasmtime_instance_t),
    POINTER(POINTER(ffi.wasm_trap_t)),
]
_instance_new.restype = POINTER(ffi.wasmtime_error_t)
_export_get = ffi.dll["wasmtime_instance_export_get"]
_export_get.argtypes = [
    c_void_p,
    POINTER(ffi.wasmtime_instance_t),
    ctypes.c_char_p,
    c_size_t,
    POINTER(ffi.wasmtime_extern_t),
]
_export_get.restype = ctypes.c_bool
_func_call = ffi.dll["wasmtime_func_call"]
_func_call.argtypes = [
    c_void_p,
    POINTER(ffi.wasmtime_func_t),
    POINTER(ffi.wasmtime_val_t),
    c_size_t,
    POINTER(ffi.wasmtime_val_t),
    c_size_t,
    POINTER(POINTER(ffi.wasm_trap_t)),
]
_func_call.restype = POINTER(ffi.wasmtime_error_t)
_memory_data = ffi.dll["wasmtime_memory_data"]
_memory_data.argtypes = [c_void_p, POINTER(ffi.wasmtime_memory_t)]
_memory_data.restype = c_void_p
_memory_data_size = ffi.dll["wasmtime_memory_data_size"]
_memory_data_size.argtypes = [c_void_p, POINTER(ffi.wasmtime_memory_t)]
_memory_data_size.restype = c_size_t
_memory_grow = ffi.dll["wasmtime_memory_grow"]
_memory_grow.argtypes = [c_void_p, POINTER(ffi.wasmtime_memory_t), c_uint64, POINTER(c_uint64)]
_memory_grow.restype = POINTER(ffi.wasmtime_error_t)

_EXTERN_FUNC = ffi.WASMTIME_EXTERN_FUNC.value
_EXTERN_MEMORY = ffi.WASMTIME_EXTERN_MEMORY.value

Func = ffi.wasmtime_func_t
Memory = ffi.wasmtime_memory_t
Instance = ffi.wasmtime_instance_t


def _raise_error(error: object) -> None:
    raise WasmtimeError._from_ptr(error)  # type: ignore[arg-type]


def store_new(engine: object) -> int:
    """A new store (a raw pointer the caller must pass to `store_delete`)."""
    store = _store_new(engine, None, None)
    if not store:
        raise MemoryError("wasmtime_store_new failed")
    return int(store)


def store_delete(store: int) -> None:
    _store_delete(store)


def store_context(store: int) -> int:
    return int(_store_context(store))


def store_limit(
    store: int, memory_bytes: int, table_elements: int, instances: int, tables: int, memories: int
) -> None:
    """Store limits: memory.grow / table.grow past them return -1; instantiation fails."""
    _store_limiter(store, memory_bytes, table_elements, instances, tables, memories)


def set_fuel(context: int, fuel: int) -> None:
    error = _set_fuel(context, fuel)
    if error:
        _raise_error(error)


def get_fuel(context: int) -> int:
    remaining = c_uint64(0)
    error = _get_fuel(context, byref(remaining))
    if error:
        _raise_error(error)
    return remaining.value


def set_epoch_deadline(context: int, ticks: int) -> None:
    _set_epoch_deadline(context, ticks)


def instantiate(context: int, module: object) -> Instance:
    """Instantiate with no imports at all; raises `Trap` or `WasmtimeError`."""
    instance = Instance()
    trap = POINTER(ffi.wasm_trap_t)()
    error = _instance_new(context, module, None, 0, byref(instance), byref(trap))
    if error:
        _raise_error(error)
    if trap:
        raise Trap._from_ptr(trap)
    return instance


class ExportName:
    """An export name encoded once, so a lookup costs one C call."""

    __slots__ = ("encoded", "size")

    def __init__(self, name: str) -> None:
        self.encoded = name.encode()
        self.size = len(self.encoded)


def get_func(context: int, instance: Instance, name: ExportName) -> Func | None:
    item = ffi.wasmtime_extern_t()
    found = _export_get(context, byref(instance), name.encoded, name.size, byref(item))
    if not found or item.kind != _EXTERN_FUNC:
        return None
    return item.of.func


def get_memory(context: int, instance: Instance, name: ExportName) -> Memory | None:
    item = ffi.wasmtime_extern_t()
    found = _export_get(context, byref(instance), name.encoded, name.size, byref(item))
    if not found or item.kind != _EXTERN_MEMORY:
        return None
    return item.of.memory


class I32Calls:
    """Calls of `(i32) -> i32` and `(i32, i32) -> i32` functions through reused buffers.

    The function's type was checked when the module was loaded, so no type
    is fetched per call; wasmtime still checks the values against it. The
    result is returned as wasm sees it, signed. One instance per thread.
    """

    __slots__ = ("_args", "_results", "_trap")

    def __init__(self) -> None:
        self._args = (ffi.wasmtime_val_t * 2)()
        for arg in self._args:
            arg.kind = ffi.WASMTIME_I32
        self._results = (ffi.wasmtime_val_t * 1)()
        self._trap = POINTER(ffi.wasm_trap_t)()

    def call1(self, context: int, func: Func, a: int) -> int:
        self._args[0].of.i32 = a
        return self._call(context, func, 1)

    def call2(self, context: int, func: Func, a: int, b: int) -> int:
        args = self._args
        args[0].of.i32 = a
        args[1].of.i32 = b
        return self._call(context, func, 2)

    def _call(self, context: int, func: Func, arity: int) -> int:
        trap = self._trap
        error = _func_call(context, byref(func), self._args, arity, self._results, 1, byref(trap))
        if error:
            _raise_error(error)
        if trap:
            self._trap = POINTER(ffi.wasm_trap_t)()  # the Trap below takes the old pointer
            raise Trap._from_ptr(trap)
        return int(self._results[0].of.i32)


def memory_base(context: int, memory: Memory) -> int:
    """Address of linear memory; re-read after anything that may grow it."""
    return int(_memory_data(context, byref(memory)) or 0)


def memory_size(context: int, memory: Memory) -> int:
    return int(_memory_data_size(context, byref(memory)))


def memory_grow(context: int, memory: Memory, pages: int) -> int | None:
    """Grow by `pages`; the previous size in pages, or None when a limit refuses it."""
    previous = c_uint64(0)
    error = _memory_grow(context, byref(memory), pages, byref(previous))
    if error:
        WasmtimeError._from_ptr(error)  # take ownership so the error is freed
        return None
    return previous.value


def find_nul(address: int, limit: int) -> int:
    """Offset of the first NUL in [address, address + limit), or -1: a bounded C read."""
    if limit <= 0:
        return -1
    hit = _memchr(address, 0, limit)
    return -1 if hit is None else int(hit) - address


def write(address: int, data: bytes) -> None:
    """Copy `data` to `address`; the caller has bounds-checked the destination."""
    ctypes.memmove(address, data, len(data))


def read(address: int, size: int) -> bytes:
    """Copy `size` bytes from `address`; the caller has bounds-checked the source."""
    return ctypes.string_at(address, size)
