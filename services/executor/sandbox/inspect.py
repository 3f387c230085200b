"""The guest ABI check (SPEC §6): what a module must and must not contain.

Two passes. `scan_binary` reads the section headers of the raw bytes before
anything is compiled: it is linear, pure Python, and catches what wasmtime's
type API cannot see (unexported tables and memories) or should not be asked
about (100k exports make `Instance.exports()` take minutes). `check_abi`
then reads the compiled module's export types for the signatures. Every
refusal is a `ModuleRejected` whose reason the uploader can act on.
"""

from __future__ import annotations

from dataclasses import dataclass

from wasmtime import ExportType, FuncType, MemoryType, Module, ValType

from .limits import DEFAULT_LIMITS, WASM_PAGE, Limits
from .result import ModuleRejected, RejectionKind

MAGIC = b"\x00asm"
CORE_VERSION = b"\x01\x00\x00\x00"
_IMPORT, _TABLE, _MEMORY, _EXPORT = 2, 4, 5, 7
_KNOWN_SECTIONS = frozenset(range(14))
_FUNCREF = 0x70
_ONE_MEMORY = "exactly one, exported as `memory`, is required"


@dataclass(frozen=True, slots=True)
class Bounds:
    minimum: int
    maximum: int | None


@dataclass(frozen=True, slots=True)
class BinaryShape:
    """Section-level facts about a module, read without compiling it."""

    imports: tuple[str, ...]
    memories: tuple[Bounds, ...]
    tables: tuple[Bounds, ...]
    exports: int


@dataclass(frozen=True, slots=True)
class ModuleAbi:
    """What a run needs to know about a checked module."""

    has_alloc: bool
    initial_memory_bytes: int


class _Reader:
    """Bounds-checked LEB128 reader; truncation is a rejection, never an IndexError."""

    def __init__(self, data: bytes, start: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = start
        self.end = len(data) if end is None else end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise _invalid("truncated module")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def uleb(self, bits: int = 32) -> int:
        result = shift = 0
        while True:
            byte = self.byte()
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift >= bits + 7:
                raise _invalid("malformed integer encoding")
        if result >> bits:
            raise _invalid("integer too large")
        return result

    def name(self) -> str:
        size = self.uleb()
        if size > self.end - self.pos:
            raise _invalid("truncated name")
        raw = self.data[self.pos : self.pos + size]
        self.pos += size
        return raw.decode("utf-8", errors="replace")


def _invalid(reason: str) -> ModuleRejected:
    return ModuleRejected(RejectionKind.INVALID, f"invalid WebAssembly: {reason}")


def scan_binary(wasm: bytes, limits: Limits = DEFAULT_LIMITS) -> BinaryShape:
    """Read header, imports, tables, memories and the export count; refuse early."""
    if not wasm:
        raise ModuleRejected(RejectionKind.NOT_WASM, "module is empty")
    if len(wasm) > limits.module_bytes:
        raise ModuleRejected(
            RejectionKind.TOO_LARGE,
            f"module is {len(wasm)} bytes; the limit is {limits.module_bytes} bytes",
        )
    if wasm[:4] != MAGIC:
        raise ModuleRejected(RejectionKind.NOT_WASM, "not a WebAssembly binary (bad magic number)")
    if wasm[4:8] != CORE_VERSION:
        if len(wasm) >= 8 and wasm[6:8] == b"\x01\x00":
            raise ModuleRejected(
                RejectionKind.NOT_WASM, "components are not supported; upload a core module"
            )
        raise ModuleRejected(RejectionKind.NOT_WASM, "unsupported WebAssembly version")
    imports: list[str] = []
    memories: list[Bounds] = []
    tables: list[Bounds] = []
    exports = 0
    reader = _Reader(wasm, 8)
    while reader.pos < reader.end:
        section = reader.byte()
        size = reader.uleb()
        end = reader.pos + size
        if end > reader.end:
            raise _invalid(f"section {section} runs past the end of the module")
        if section not in _KNOWN_SECTIONS:
            raise _invalid(f"unknown section id {section}")
        body = _Reader(wasm, reader.pos, end)
        if section == _IMPORT:
            imports.extend(_import_names(body))
        elif section == _TABLE:
            count = _capped(body.uleb(), limits.tables, "tables", "at most one is allowed")
            tables.extend(_table(body) for _ in range(count))
        elif section == _MEMORY:
            count = _capped(body.uleb(), limits.memories, "memories", _ONE_MEMORY)
            memories.extend(_memory(body) for _ in range(count))
        elif section == _EXPORT:
            exports = body.uleb()
        reader.pos = end
    shape = BinaryShape(tuple(imports), tuple(memories), tuple(tables), exports)
    check_shape(shape, limits)
    return shape


def _capped(count: int, limit: int, what: str, rule: str) -> int:
    """Refuse an over-long vector from its count, before reading (a 2M-entry table
    section would otherwise cost seconds of pure-Python parsing)."""
    if count > limit:
        raise ModuleRejected(RejectionKind.ABI, f"module defines {count} {what}; {rule}")
    return count


def _import_names(body: _Reader) -> list[str]:
    # Only the first few are named in the refusal; any import at all is refused.
    count = body.uleb()
    return [f"{body.name()}.{body.name()}" for _ in range(min(count, 3))]


def _limits(body: _Reader, what: str) -> Bounds:
    """Limits of a table or memory (`what`, plural); only 32-bit unshared ones pass."""
    flags = body.byte()
    if flags & 0x02:
        raise ModuleRejected(RejectionKind.ABI, f"shared {what} are not supported")
    if flags & 0x04:
        raise ModuleRejected(RejectionKind.ABI, f"64-bit {what} are not supported")
    if flags & ~0x01:
        raise ModuleRejected(RejectionKind.ABI, f"unsupported limits on {what} (flags {flags:#x})")
    minimum = body.uleb()
    maximum = body.uleb() if flags & 0x01 else None
    return Bounds(minimum, maximum)


def _table(body: _Reader) -> Bounds:
    if body.byte() != _FUNCREF:
        raise ModuleRejected(RejectionKind.ABI, "only funcref tables are supported")
    return _limits(body, "tables")


def _memory(body: _Reader) -> Bounds:
    return _limits(body, "memories")


def check_shape(shape: BinaryShape, limits: Limits = DEFAULT_LIMITS) -> None:
    """The structural rules: no imports, export cap, one memory, one bounded table."""
    if shape.imports:
        raise ModuleRejected(
            RejectionKind.ABI,
            f"module imports {', '.join(shape.imports)}; a sandboxed module may not import"
            " anything",
        )
    if shape.exports > limits.exports:
        raise ModuleRejected(
            RejectionKind.ABI,
            f"module has {shape.exports} exports; at most {limits.exports} are allowed",
        )
    if len(shape.memories) != limits.memories:
        raise ModuleRejected(
            RejectionKind.ABI, f"module defines {len(shape.memories)} memories; {_ONE_MEMORY}"
        )
    _check_initial_memory(shape.memories[0].minimum, limits)
    _capped(len(shape.tables), limits.tables, "tables", "at most one is allowed")
    for table in shape.tables:
        if table.maximum is None or table.maximum > limits.table_elements:
            raise ModuleRejected(
                RejectionKind.LIMITS,
                f"the table must declare a maximum of at most {limits.table_elements} elements"
                f" (declared: {'none' if table.maximum is None else table.maximum})",
            )


def _check_initial_memory(pages: int, limits: Limits) -> None:
    if pages > limits.memory_pages:
        raise ModuleRejected(
            RejectionKind.LIMITS,
            f"initial memory is {pages} pages ({pages * WASM_PAGE} bytes); the limit is"
            f" {limits.memory_pages} pages ({limits.memory_bytes} bytes)",
        )


def _is_i32(types: list[ValType], count: int) -> bool:
    return len(types) == count and all(t == ValType.i32() for t in types)


def check_abi(module: Module, limits: Limits = DEFAULT_LIMITS) -> ModuleAbi:
    """Check the compiled module's exports: `memory`, `execute`, optional `alloc`.

    Runs at upload and again whenever a worker loads an artifact (a few
    dozen exports at most, so it is cheap), so a run never trusts a name
    without its type.
    """
    if module.imports:
        raise ModuleRejected(RejectionKind.ABI, "a sandboxed module may not import anything")
    exports = module.exports
    if len(exports) > limits.exports:
        raise ModuleRejected(
            RejectionKind.ABI,
            f"module has {len(exports)} exports; at most {limits.exports} are allowed",
        )
    by_name: dict[str, ExportType] = {export.name: export for export in exports}
    memory = by_name.get("memory")
    memory_type = memory.type if memory is not None else None
    if not isinstance(memory_type, MemoryType):
        raise ModuleRejected(RejectionKind.ABI, "module must export its memory as `memory`")
    if memory_type.is_64 or memory_type.is_shared:
        raise ModuleRejected(RejectionKind.ABI, "`memory` must be a 32-bit unshared memory")
    _check_initial_memory(memory_type.limits.min, limits)
    execute = by_name.get("execute")
    execute_type = execute.type if execute is not None else None
    if not isinstance(execute_type, FuncType):
        raise ModuleRejected(
            RejectionKind.ABI, "module must export a function `execute(i32, i32) -> i32`"
        )
    if not (_is_i32(execute_type.params, 2) and _is_i32(execute_type.results, 1)):
        raise ModuleRejected(
            RejectionKind.ABI,
            f"`execute` must have type (i32, i32) -> i32, not {_signature(execute_type)}",
        )
    alloc = by_name.get("alloc")
    if alloc is not None:
        alloc_type = alloc.type
        if not isinstance(alloc_type, FuncType) or not (
            _is_i32(alloc_type.params, 1) and _is_i32(alloc_type.results, 1)
        ):
            raise ModuleRejected(
                RejectionKind.ABI,
                "`alloc` must be a function of type (i32) -> i32"
                + (f", not {_signature(alloc_type)}" if isinstance(alloc_type, FuncType) else ""),
            )
    return ModuleAbi(
        has_alloc=alloc is not None, initial_memory_bytes=memory_type.limits.min * WASM_PAGE
    )


def _signature(func: FuncType) -> str:
    params = ", ".join(str(t) for t in func.params)
    results = ", ".join(str(t) for t in func.results)
    return f"({params}) -> {results or '()'}"
