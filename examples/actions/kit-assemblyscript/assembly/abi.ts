// eventflow guest ABI glue (SPEC §6): raw core WebAssembly, no imports.
//
//   host: ptr = alloc(len); write the UTF-8 JSON envelope at ptr;
//         out = execute(ptr, len)
//   guest: out is a pointer to a NUL-terminated UTF-8 JSON document, or 0 to
//          reject the payload (the step fails with REJECTED).
//
// An action's entry file re-exports `alloc` and defines `execute`:
//
//   export { alloc } from "../../kit-assemblyscript/assembly";
//   export function execute(ptr: usize, len: i32): usize { ... }

import { JsonKind, JsonObject, JsonValue, parseJson, parseJsonBytes } from "./json";

/** Return this from `execute` to reject the payload. */
export const REJECT: usize = 0;

/**
 * ABI export: reserves `len` bytes for the host to write the input into.
 * Memory is never freed: every run gets a fresh instance.
 */
export function alloc(len: i32): usize {
  if (len < 0) unreachable();
  return heap.alloc(<usize>len);
}

/** The input bytes at `ptr` decoded as a (UTF-16) string. */
export function readInput(ptr: usize, len: i32): string {
  if (len < 0) unreachable();
  return String.UTF8.decodeUnsafe(ptr, <usize>len);
}

/**
 * Encodes `json` as NUL-terminated UTF-8 and returns its address: the value
 * `execute` returns. Lone surrogates become U+FFFD (JsonWriter never emits
 * them). A raw NUL would cut the document short, so it traps instead
 * (JsonWriter escapes it as \u0000).
 */
export function returnJson(json: string): usize {
  const src = changetype<usize>(json);
  const n = json.length;
  // At most 3 bytes per UTF-16 code unit (a surrogate pair: 4 bytes for 2).
  const out = heap.alloc(<usize>n * 3 + 1);
  let o = out;
  for (let i = 0; i < n; i++) {
    let c = <u32>load<u16>(src + (<usize>i << 1));
    if (c - 1 < 0x7f) {
      // ASCII other than NUL
      store<u8>(o++, <u8>c);
      continue;
    }
    if (c == 0) unreachable();
    if (c < 0x800) {
      store<u8>(o, <u8>(0xc0 | (c >> 6)));
      store<u8>(o, <u8>(0x80 | (c & 0x3f)), 1);
      o += 2;
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      if (c <= 0xdbff && i + 1 < n) {
        const d = <u32>load<u16>(src + (<usize>(i + 1) << 1));
        if (d >= 0xdc00 && d <= 0xdfff) {
          const cp = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          store<u8>(o, <u8>(0xf0 | (cp >> 18)));
          store<u8>(o, <u8>(0x80 | ((cp >> 12) & 0x3f)), 1);
          store<u8>(o, <u8>(0x80 | ((cp >> 6) & 0x3f)), 2);
          store<u8>(o, <u8>(0x80 | (cp & 0x3f)), 3);
          o += 4;
          i++;
          continue;
        }
      }
      c = 0xfffd;
    }
    store<u8>(o, <u8>(0xe0 | (c >> 12)));
    store<u8>(o, <u8>(0x80 | ((c >> 6) & 0x3f)), 1);
    store<u8>(o, <u8>(0x80 | (c & 0x3f)), 2);
    o += 3;
  }
  store<u8>(o, 0);
  return out;
}

/** The input envelope `{payload, secrets, permissions, action}`. */
export class Envelope {
  constructor(
    /** The triggering event's data, verbatim (usually an object). */
    public readonly payload: JsonValue,
    /** Only keys declared `read_secret:<KEY>` and stored; absent otherwise. */
    public readonly secrets: JsonObject,
    public readonly permissions: Array<string>,
    public readonly action: string,
  ) {}

  /** The secret `key` if it is present and a string, else null. */
  secret(key: string): string | null {
    return this.secrets.getString(key);
  }
}

/**
 * Parses the envelope in place (the input bytes are not copied or decoded up
 * front). Returns null when the input is not valid UTF-8 JSON, not an object,
 * or has no `payload`; missing `secrets`/`permissions`/`action` read as empty.
 */
export function readEnvelope(ptr: usize, len: i32): Envelope | null {
  const root = parseJsonBytes(ptr, len);
  if (root == null || root.kind != JsonKind.OBJECT) return null;
  const obj = changetype<JsonObject>(root);
  const payload = obj.get("payload");
  if (payload == null) return null;
  let secrets = obj.getObject("secrets");
  if (secrets == null) secrets = changetype<JsonObject>(parseJson("{}"));
  const permissions = new Array<string>();
  const perms = obj.getArray("permissions");
  if (perms != null) {
    const items = perms.items();
    for (let i = 0; i < items.length; i++) {
      const p = unchecked(items[i]).asString();
      if (p != null) permissions.push(p.value);
    }
  }
  let action = obj.getString("action");
  if (action == null) action = "";
  return new Envelope(payload, secrets, permissions, action);
}

// ---------------------------------------------------------------------------
// Text helpers. AssemblyScript strings are UTF-16; eventflow's length limits
// (SPEC §6: entity_id ≤ 200, title ≤ 200, …) count characters (code points).

function isHighSurrogateAt(s: string, i: i32): bool {
  const c = s.charCodeAt(i);
  if (c < 0xd800 || c > 0xdbff) return false;
  const d = s.charCodeAt(i + 1);
  return d >= 0xdc00 && d <= 0xdfff;
}

/** The number of code points in `s` (a surrogate pair counts once). */
export function codePointCount(s: string): i32 {
  let count = 0;
  for (let i = 0; i < s.length; i++) {
    if (isHighSurrogateAt(s, i)) i++;
    count++;
  }
  return count;
}

/** `s` cut to at most `max` code points, never splitting a surrogate pair. */
export function truncateCodePoints(s: string, max: i32): string {
  let count = 0;
  for (let i = 0; i < s.length; i++) {
    if (count == max) return s.substring(0, i);
    if (isHighSurrogateAt(s, i)) i++;
    count++;
  }
  return s;
}

function isAsciiSpace(c: i32): bool {
  return c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d;
}

/** `s` without leading/trailing ASCII whitespace (space, tab, CR, LF). */
export function trimAscii(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && isAsciiSpace(s.charCodeAt(start))) start++;
  while (end > start && isAsciiSpace(s.charCodeAt(end - 1))) end--;
  return s.substring(start, end);
}

/**
 * Parses a non-negative decimal integer made only of ASCII digits (at most 9
 * of them, so it fits an i32). Returns -1 for anything else ("", "7.5", "-1",
 * "+3", "1e2", " 7").
 */
export function parseDecimalInt(s: string): i32 {
  const n = s.length;
  if (n == 0 || n > 9) return -1;
  let v = 0;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return -1;
    v = v * 10 + (c - 0x30);
  }
  return v;
}
