// A small, strict JSON reader (RFC 8259) for eventflow actions.
//
// Designed for the sandbox's budgets (SPEC §6: fuel, 10 MiB of memory, and a
// stub runtime that never frees): the input is read in place as UTF-8 bytes
// and validated in one pass that records a compact "tape" — 16 bytes per JSON
// value, nothing else. Strings and numbers are only decoded when you ask for
// them, so an action that reads five fields of a 1 MiB payload pays for the
// scan and for those five fields.
//
// Nothing here traps on bad input (AssemblyScript has no exceptions):
// `parseJson*` returns null unless the input is exactly one valid JSON value
// in valid UTF-8. Duplicate object keys are kept; `get` returns the last one,
// like Python's json module. Nesting deeper than MAX_DEPTH is rejected.

import { StringBuilder } from "./builder";

/** The six JSON types. */
export enum JsonKind {
  NULL = 0,
  BOOL = 1,
  NUMBER = 2,
  STRING = 3,
  ARRAY = 4,
  OBJECT = 5,
}

/** Nesting deeper than this is rejected (keeps the wasm stack small). */
export const MAX_DEPTH: i32 = 128;

// Tape: 4 × i32 per value, in document order (an object's members are
// key, value, key, value, …):
//   [0] kind | FLAG_ESCAPES (string contains backslash escapes)
//   [1] string: offset of its first byte after the opening quote;
//       number: offset of its first character; others: unused
//   [2] string/number: byte length (string: between the quotes, still escaped);
//       bool: 0/1; array: element count; object: member count
//   [3] index of the node just past this value (and its children)
const NODE_WORDS: i32 = 4;
const FLAG_ESCAPES: i32 = 8;
const KIND_MASK: i32 = 7;

/** A parsed document: the UTF-8 input (read in place) plus its tape. */
export class JsonDocument {
  private tape: usize = 0;
  private capacity: i32 = 0; // in nodes
  count: i32 = 0; // nodes written

  constructor(
    /** Address of the UTF-8 input. */
    readonly base: usize,
    readonly byteLength: i32,
    /** Keeps a parsed buffer alive under a GC runtime (parseJson(string)). */
    private readonly owner: ArrayBuffer | null = null,
  ) {}

  /** Appends a node; returns its index. */
  push(kind: i32, start: i32, len: i32): i32 {
    if (this.count == this.capacity) {
      const cap = this.capacity < 16 ? 16 : this.capacity << 1;
      const bytes = <usize>cap * NODE_WORDS * 4;
      this.tape = this.tape == 0 ? heap.alloc(bytes) : heap.realloc(this.tape, bytes);
      this.capacity = cap;
    }
    const at = this.tape + <usize>this.count * NODE_WORDS * 4;
    store<i32>(at, kind);
    store<i32>(at, start, 4);
    store<i32>(at, len, 8);
    store<i32>(at, this.count + 1, 12);
    return this.count++;
  }

  @inline word(index: i32, w: i32): i32 {
    return load<i32>(this.tape + ((<usize>index * NODE_WORDS + <usize>w) << 2));
  }

  @inline setWord(index: i32, w: i32, value: i32): void {
    store<i32>(this.tape + ((<usize>index * NODE_WORDS + <usize>w) << 2), value);
  }

  @inline kindOf(index: i32): JsonKind {
    return <JsonKind>(this.word(index, 0) & KIND_MASK);
  }

  /** Index of the node after `index` and its children. */
  @inline skip(index: i32): i32 {
    return this.word(index, 3);
  }

  /** A handle of the right subclass for the node at `index`. */
  value(index: i32): JsonValue {
    switch (this.kindOf(index)) {
      case JsonKind.NULL:
        return new JsonNull(this, index);
      case JsonKind.BOOL:
        return new JsonBool(this, index);
      case JsonKind.NUMBER:
        return new JsonNumber(this, index);
      case JsonKind.STRING:
        return new JsonString(this, index);
      case JsonKind.ARRAY:
        return new JsonArray(this, index);
      default:
        return new JsonObject(this, index);
    }
  }

  /** Decodes the string node at `index`. */
  decodeString(index: i32): string {
    const start = this.base + <usize>this.word(index, 1);
    const len = this.word(index, 2);
    if ((this.word(index, 0) & FLAG_ESCAPES) == 0) return String.UTF8.decodeUnsafe(start, <usize>len);
    return unescape(start, len);
  }

  /** True when the string node at `index` equals `key`. */
  stringEquals(index: i32, key: string): bool {
    if ((this.word(index, 0) & FLAG_ESCAPES) == 0) {
      // Compare the UTF-8 bytes with the key's code units while both are
      // ASCII: no decoding, no allocation.
      let p = this.base + <usize>this.word(index, 1);
      const end = p + <usize>this.word(index, 2);
      const k = changetype<usize>(key);
      const n = key.length;
      let i = 0;
      for (; i < n; i++) {
        const c = <u32>load<u16>(k + (<usize>i << 1));
        if (c >= 0x80) break;
        if (p >= end || <u32>load<u8>(p) != c) return false;
        p++;
      }
      if (i == n) return p == end;
    }
    return this.decodeString(index) == key;
  }
}

// ---------------------------------------------------------------------------
// Handles. Each is a small object pointing at a node of its document; they are
// created when you navigate, so keep the ones you reuse in a local.

export class JsonValue {
  constructor(
    readonly doc: JsonDocument,
    readonly index: i32,
    readonly kind: JsonKind,
  ) {}

  get isNull(): bool {
    return this.kind == JsonKind.NULL;
  }
  get isBool(): bool {
    return this.kind == JsonKind.BOOL;
  }
  get isNumber(): bool {
    return this.kind == JsonKind.NUMBER;
  }
  get isString(): bool {
    return this.kind == JsonKind.STRING;
  }
  get isArray(): bool {
    return this.kind == JsonKind.ARRAY;
  }
  get isObject(): bool {
    return this.kind == JsonKind.OBJECT;
  }

  // Typed views: null when the value is of another kind.
  asBool(): JsonBool | null {
    return this.kind == JsonKind.BOOL ? changetype<JsonBool>(this) : null;
  }
  asNumber(): JsonNumber | null {
    return this.kind == JsonKind.NUMBER ? changetype<JsonNumber>(this) : null;
  }
  asString(): JsonString | null {
    return this.kind == JsonKind.STRING ? changetype<JsonString>(this) : null;
  }
  asArray(): JsonArray | null {
    return this.kind == JsonKind.ARRAY ? changetype<JsonArray>(this) : null;
  }
  asObject(): JsonObject | null {
    return this.kind == JsonKind.OBJECT ? changetype<JsonObject>(this) : null;
  }
}

export class JsonNull extends JsonValue {
  constructor(doc: JsonDocument, index: i32) {
    super(doc, index, JsonKind.NULL);
  }
}

export class JsonBool extends JsonValue {
  constructor(doc: JsonDocument, index: i32) {
    super(doc, index, JsonKind.BOOL);
  }
  get value(): bool {
    return this.doc.word(this.index, 2) != 0;
  }
}

export class JsonNumber extends JsonValue {
  constructor(doc: JsonDocument, index: i32) {
    super(doc, index, JsonKind.NUMBER);
  }
  /** The number as an f64 (correctly rounded for up to 15 significant digits). */
  get value(): f64 {
    return numberValue(this.doc.base + <usize>this.doc.word(this.index, 1), this.doc.word(this.index, 2));
  }
  /** The number exactly as written in the input. */
  get raw(): string {
    return String.UTF8.decodeUnsafe(
      this.doc.base + <usize>this.doc.word(this.index, 1),
      <usize>this.doc.word(this.index, 2),
    );
  }
}

export class JsonString extends JsonValue {
  private cached: string | null = null;
  constructor(doc: JsonDocument, index: i32) {
    super(doc, index, JsonKind.STRING);
  }
  /** The decoded string (decoded on first use). */
  get value(): string {
    let s = this.cached;
    if (s == null) {
      s = this.doc.decodeString(this.index);
      this.cached = s;
    }
    return s;
  }
}

export class JsonArray extends JsonValue {
  constructor(doc: JsonDocument, index: i32) {
    super(doc, index, JsonKind.ARRAY);
  }
  get length(): i32 {
    return this.doc.word(this.index, 2);
  }
  /** The element at `i` (walks the array: use items() to iterate). */
  at(i: i32): JsonValue | null {
    if (i < 0 || i >= this.length) return null;
    let node = this.index + 1;
    for (let k = 0; k < i; k++) node = this.doc.skip(node);
    return this.doc.value(node);
  }
  /** All elements, in order. */
  items(): Array<JsonValue> {
    const doc = this.doc;
    const n = this.length;
    const out = new Array<JsonValue>(n);
    let node = this.index + 1;
    for (let k = 0; k < n; k++) {
      unchecked((out[k] = doc.value(node)));
      node = doc.skip(node);
    }
    return out;
  }
}

export class JsonObject extends JsonValue {
  constructor(doc: JsonDocument, index: i32) {
    super(doc, index, JsonKind.OBJECT);
  }
  /** Number of members (repeated keys included). */
  get size(): i32 {
    return this.doc.word(this.index, 2);
  }
  has(key: string): bool {
    return this.find(key) >= 0;
  }
  /** The value under `key` (the last one if repeated), or null when absent. */
  get(key: string): JsonValue | null {
    const node = this.find(key);
    return node < 0 ? null : this.doc.value(node);
  }
  // Typed getters: null when the key is absent or holds another kind.
  getString(key: string): string | null {
    const node = this.find(key);
    if (node < 0 || this.doc.kindOf(node) != JsonKind.STRING) return null;
    return this.doc.decodeString(node);
  }
  getNumber(key: string): JsonNumber | null {
    const v = this.get(key);
    return v == null ? null : v.asNumber();
  }
  getBool(key: string): JsonBool | null {
    const v = this.get(key);
    return v == null ? null : v.asBool();
  }
  getObject(key: string): JsonObject | null {
    const v = this.get(key);
    return v == null ? null : v.asObject();
  }
  getArray(key: string): JsonArray | null {
    const v = this.get(key);
    return v == null ? null : v.asArray();
  }
  /** The keys, in document order (repeats included). */
  keys(): Array<string> {
    const doc = this.doc;
    const n = this.size;
    const out = new Array<string>(n);
    let node = this.index + 1;
    for (let k = 0; k < n; k++) {
      unchecked((out[k] = doc.decodeString(node)));
      node = doc.skip(doc.skip(node));
    }
    return out;
  }
  /** The values, in the order of keys(). */
  values(): Array<JsonValue> {
    const doc = this.doc;
    const n = this.size;
    const out = new Array<JsonValue>(n);
    let node = this.index + 1;
    for (let k = 0; k < n; k++) {
      const valueNode = doc.skip(node);
      unchecked((out[k] = doc.value(valueNode)));
      node = doc.skip(valueNode);
    }
    return out;
  }
  /** Tape index of the value for `key` (last match), or -1. */
  private find(key: string): i32 {
    const doc = this.doc;
    const n = this.size;
    let found = -1;
    let node = this.index + 1;
    for (let k = 0; k < n; k++) {
      const valueNode = doc.skip(node);
      if (doc.stringEquals(node, key)) found = valueNode;
      node = doc.skip(valueNode);
    }
    return found;
  }
}

/**
 * Parses `len` bytes of UTF-8 at `ptr` as exactly one JSON value; null if they
 * are not. The bytes are read in place and must stay untouched afterwards.
 */
export function parseJsonBytes(ptr: usize, len: i32): JsonValue | null {
  if (len < 0) return null;
  const doc = new JsonDocument(ptr, len);
  return parseInto(doc);
}

/** Parses a string as exactly one JSON value; null if it is not valid JSON. */
export function parseJson(text: string): JsonValue | null {
  const utf8 = String.UTF8.encode(text);
  const doc = new JsonDocument(changetype<usize>(utf8), utf8.byteLength, utf8);
  return parseInto(doc);
}

function parseInto(doc: JsonDocument): JsonValue | null {
  const p = new Parser(doc);
  p.skipWs();
  if (!p.value(0)) return null;
  p.skipWs();
  if (p.p != p.end) return null;
  return doc.value(0);
}

// ---------------------------------------------------------------------------
// The parser walks raw bytes with a pointer: on a fuel-metered sandbox every
// wasm instruction counts.

const CH_TAB: u32 = 0x09;
const CH_LF: u32 = 0x0a;
const CH_CR: u32 = 0x0d;
const CH_SPACE: u32 = 0x20;
const CH_QUOTE: u32 = 0x22;
const CH_PLUS: u32 = 0x2b;
const CH_COMMA: u32 = 0x2c;
const CH_MINUS: u32 = 0x2d;
const CH_DOT: u32 = 0x2e;
const CH_SLASH: u32 = 0x2f;
const CH_0: u32 = 0x30;
const CH_COLON: u32 = 0x3a;
const CH_E: u32 = 0x45;
const CH_LBRACKET: u32 = 0x5b;
const CH_BACKSLASH: u32 = 0x5c;
const CH_RBRACKET: u32 = 0x5d;
const CH_LOWER_E: u32 = 0x65;
const CH_LBRACE: u32 = 0x7b;
const CH_RBRACE: u32 = 0x7d;

// @ts-ignore: decorator
@inline function isDigit(c: u32): bool {
  return c - CH_0 < 10;
}

function hexValue(c: u32): i32 {
  if (c - CH_0 < 10) return <i32>(c - CH_0);
  const l = c | 0x20; // ASCII lower case
  if (l >= 0x61 && l <= 0x66) return <i32>(l - 0x61 + 10); // a-f
  return -1;
}

// 1 for bytes that may appear unescaped in a string and need no further
// check: printable ASCII except '"' and '\\'.
const PLAIN: usize = memory.data<u8>([
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
]);

/** Length of the valid UTF-8 sequence (2–4 bytes) at `p` led by `c` ≥ 0x80, or 0. */
function utf8SequenceLength(p: usize, end: usize, c: u32): i32 {
  let n: i32;
  let lo: u32 = 0x80; // allowed range of the second byte
  let hi: u32 = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0; // no overlong forms
    else if (c == 0xed) hi = 0x9f; // no UTF-16 surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    else if (c == 0xf4) hi = 0x8f; // ≤ U+10FFFF
  } else return 0;
  if (p + <usize>n > end) return 0;
  const c1 = <u32>load<u8>(p, 1);
  if (c1 < lo || c1 > hi) return 0;
  for (let k = 2; k < n; k++) {
    const ck = <u32>load<u8>(p + <usize>k);
    if ((ck & 0xc0) != 0x80) return 0;
  }
  return n;
}

class Parser {
  p: usize;
  readonly end: usize;
  private readonly base: usize;

  constructor(private readonly doc: JsonDocument) {
    this.base = doc.base;
    this.p = doc.base;
    this.end = doc.base + <usize>doc.byteLength;
  }

  /** The byte at the cursor, or 0xffffffff at the end. */
  @inline peek(): u32 {
    return this.p < this.end ? <u32>load<u8>(this.p) : 0xffffffff;
  }

  /** Skips whitespace (the call is only made when there is some). */
  @inline ws(): void {
    if (this.p < this.end && <u32>load<u8>(this.p) <= CH_SPACE) this.skipWs();
  }

  skipWs(): void {
    let p = this.p;
    const end = this.end;
    while (p < end) {
      const c = <u32>load<u8>(p);
      if (c != CH_SPACE && c != CH_LF && c != CH_CR && c != CH_TAB) break;
      p++;
    }
    this.p = p;
  }

  /** Consumes the 4-byte ASCII word `word` (little-endian u32) at the cursor. */
  literal4(word: u32, extra: i32): bool {
    const p = this.p;
    const n: usize = extra != 0 ? 5 : 4;
    if (p + n > this.end || load<u32>(p) != word) return false;
    if (extra != 0 && <i32>load<u8>(p, 4) != extra) return false;
    this.p = p + n;
    return true;
  }

  /** Parses one value at the cursor onto the tape; false on a syntax error. */
  value(depth: i32): bool {
    const c = this.peek();
    if (c == CH_QUOTE) return this.string();
    if (c == CH_LBRACE) return this.object(depth + 1);
    if (c == CH_LBRACKET) return this.array(depth + 1);
    if (c == CH_MINUS || isDigit(c)) return this.number();
    if (c == 0x74) return this.literal4(0x65757274, 0) && this.doc.push(JsonKind.BOOL, 0, 1) >= 0; // true
    if (c == 0x66) return this.literal4(0x736c6166, 0x65) && this.doc.push(JsonKind.BOOL, 0, 0) >= 0; // fals e
    if (c == 0x6e) return this.literal4(0x6c6c756e, 0) && this.doc.push(JsonKind.NULL, 0, 0) >= 0; // null
    return false;
  }

  object(depth: i32): bool {
    if (depth > MAX_DEPTH) return false;
    const doc = this.doc;
    const node = doc.push(JsonKind.OBJECT, 0, 0);
    this.p++; // {
    this.ws();
    let members = 0;
    if (this.peek() == CH_RBRACE) {
      this.p++;
    } else {
      while (true) {
        if (this.peek() != CH_QUOTE || !this.string()) return false;
        this.ws();
        if (this.peek() != CH_COLON) return false;
        this.p++;
        this.ws();
        if (!this.value(depth)) return false;
        members++;
        this.ws();
        const c = this.peek();
        this.p++;
        if (c == CH_RBRACE) break;
        if (c != CH_COMMA) return false;
        this.ws();
      }
    }
    doc.setWord(node, 2, members);
    doc.setWord(node, 3, doc.count);
    return true;
  }

  array(depth: i32): bool {
    if (depth > MAX_DEPTH) return false;
    const doc = this.doc;
    const node = doc.push(JsonKind.ARRAY, 0, 0);
    this.p++; // [
    this.ws();
    let items = 0;
    if (this.peek() == CH_RBRACKET) {
      this.p++;
    } else {
      while (true) {
        if (!this.value(depth)) return false;
        items++;
        this.ws();
        const c = this.peek();
        this.p++;
        if (c == CH_RBRACKET) break;
        if (c != CH_COMMA) return false;
        this.ws();
      }
    }
    doc.setWord(node, 2, items);
    doc.setWord(node, 3, doc.count);
    return true;
  }

  /** Validates a number's grammar; its value is computed on access. */
  number(): bool {
    const start = this.p;
    const end = this.end;
    let p = start;
    let c = this.peek();
    if (c == CH_MINUS) {
      p++;
      c = p < end ? <u32>load<u8>(p) : 0xffffffff;
    }
    // int: 0 | [1-9][0-9]*
    if (c == CH_0) {
      p++;
    } else if (isDigit(c)) {
      while (p < end && isDigit(<u32>load<u8>(p))) p++;
    } else {
      return false;
    }
    // frac: . [0-9]+
    if (p < end && <u32>load<u8>(p) == CH_DOT) {
      p++;
      if (p >= end || !isDigit(<u32>load<u8>(p))) return false;
      while (p < end && isDigit(<u32>load<u8>(p))) p++;
    }
    // exp: [eE] [+-]? [0-9]+
    if (p < end && (<u32>load<u8>(p) | 0x20) == CH_LOWER_E) {
      p++;
      if (p < end && (<u32>load<u8>(p) == CH_PLUS || <u32>load<u8>(p) == CH_MINUS)) p++;
      if (p >= end || !isDigit(<u32>load<u8>(p))) return false;
      while (p < end && isDigit(<u32>load<u8>(p))) p++;
    }
    this.p = p;
    this.doc.push(JsonKind.NUMBER, <i32>(start - this.base), <i32>(p - start));
    return true;
  }

  /** Validates a string literal (escapes and UTF-8) at the cursor's quote. */
  string(): bool {
    const start = this.p + 1;
    const end = this.end;
    let p = start;
    let flags = 0;
    while (true) {
      if (p >= end) return false;
      const c = <u32>load<u8>(p);
      if (load<u8>(PLAIN + c) != 0) {
        p++;
        continue;
      }
      if (c == CH_QUOTE) break;
      if (c == CH_BACKSLASH) {
        flags = FLAG_ESCAPES;
        if (p + 1 >= end) return false;
        const e = <u32>load<u8>(p, 1);
        if (e == 0x75) {
          // \uXXXX
          if (p + 6 > end) return false;
          for (let k = 2; k < 6; k++) if (hexValue(<u32>load<u8>(p + <usize>k)) < 0) return false;
          p += 6;
          continue;
        }
        if (
          e != CH_QUOTE && e != CH_BACKSLASH && e != CH_SLASH &&
          e != 0x62 && e != 0x66 && e != 0x6e && e != 0x72 && e != 0x74
        ) return false;
        p += 2;
        continue;
      }
      if (c < CH_SPACE) return false; // raw control character
      const n = utf8SequenceLength(p, end, c);
      if (n == 0) return false;
      p += <usize>n;
    }
    this.p = p + 1;
    this.doc.push(JsonKind.STRING | flags, <i32>(start - this.base), <i32>(p - start));
    return true;
  }
}

// ---------------------------------------------------------------------------
// Decoding on access.

// 10^0 … 10^22 are exact doubles (Clinger's fast path).
const POW10: StaticArray<f64> = [
  1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
  1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/** The value of a validated JSON number of `len` bytes at `p`. */
function numberValue(p: usize, len: i32): f64 {
  const end = p + <usize>len;
  let q = p;
  const negative = <u32>load<u8>(q) == CH_MINUS;
  if (negative) q++;
  let mantissa: u64 = 0;
  let digits = 0; // significant digits (leading zeros are not)
  let scale = 0; // digits after the decimal point
  let c: u32 = 0;
  while (q < end && isDigit((c = <u32>load<u8>(q)))) {
    if (mantissa != 0 || c != CH_0) {
      if (digits < 19) mantissa = mantissa * 10 + <u64>(c - CH_0);
      digits++;
    }
    q++;
  }
  if (q < end && c == CH_DOT) {
    q++;
    while (q < end && isDigit((c = <u32>load<u8>(q)))) {
      if (mantissa != 0 || c != CH_0) {
        if (digits < 19) mantissa = mantissa * 10 + <u64>(c - CH_0);
        digits++;
      }
      scale++;
      q++;
    }
  }
  let exponent = 0;
  if (q < end) {
    q++; // e / E
    const expNegative = <u32>load<u8>(q) == CH_MINUS;
    if (<u32>load<u8>(q) == CH_PLUS || expNegative) q++;
    while (q < end) {
      if (exponent < 100000) exponent = exponent * 10 + <i32>(<u32>load<u8>(q) - CH_0);
      q++;
    }
    if (expNegative) exponent = -exponent;
  }
  const e10 = exponent - scale;
  if (digits <= 15 && e10 >= -22 && e10 <= 22) {
    // mantissa < 10^15 < 2^53 and 10^|e10| are exact: one rounding.
    const v = e10 < 0 ? <f64>mantissa / unchecked(POW10[-e10]) : <f64>mantissa * unchecked(POW10[e10]);
    return negative ? -v : v;
  }
  return parseFloat(String.UTF8.decodeUnsafe(p, <usize>len));
}

/** Decodes a validated string body (UTF-8 with JSON escapes). */
function unescape(p: usize, len: i32): string {
  const end = p + <usize>len;
  const sb = new StringBuilder(len);
  while (p < end) {
    let c = <u32>load<u8>(p);
    if (c == CH_BACKSLASH) {
      const e = <u32>load<u8>(p, 1);
      p += 2;
      if (e == 0x75) {
        let u = 0;
        for (let k = 0; k < 4; k++) u = (u << 4) | hexValue(<u32>load<u8>(p + <usize>k));
        p += 4;
        // One UTF-16 code unit; a pair written as two escapes becomes the
        // two code units of one character, as in any JSON parser.
        sb.appendCode(u);
        continue;
      }
      let d: i32 = <i32>e; // \" \\ \/
      if (e == 0x62) d = 0x08;
      else if (e == 0x66) d = 0x0c;
      else if (e == 0x6e) d = 0x0a;
      else if (e == 0x72) d = 0x0d;
      else if (e == 0x74) d = 0x09;
      sb.appendCode(d);
      continue;
    }
    if (c < 0x80) {
      sb.appendCode(<i32>c);
      p++;
      continue;
    }
    // Validated UTF-8: decode 2–4 bytes.
    let cp: u32;
    let n: usize;
    if (c < 0xe0) {
      cp = c & 0x1f;
      n = 2;
    } else if (c < 0xf0) {
      cp = c & 0x0f;
      n = 3;
    } else {
      cp = c & 0x07;
      n = 4;
    }
    for (let k: usize = 1; k < n; k++) cp = (cp << 6) | (<u32>load<u8>(p + k) & 0x3f);
    p += n;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      sb.appendCode(<i32>(0xd800 | (cp >> 10)));
      sb.appendCode(<i32>(0xdc00 | (cp & 0x3ff)));
    } else {
      sb.appendCode(<i32>cp);
    }
  }
  return sb.toString();
}
