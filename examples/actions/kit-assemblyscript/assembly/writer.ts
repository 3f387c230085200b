// A streaming JSON writer that always produces valid UTF-8-encodable JSON:
// strings are escaped (quotes, backslashes, control characters, and lone
// surrogates as \uXXXX), non-finite numbers become null, and commas are
// inserted for you.
//
//   const w = new JsonWriter();
//   w.beginObject();
//   w.key("score"); w.int(42);
//   w.key("reasons"); w.beginArray(); w.string("amount_high"); w.endArray();
//   w.endObject();
//   return returnJson(w.toString());

import { StringBuilder } from "./builder";
import { JsonArray, JsonBool, JsonKind, JsonNumber, JsonObject, JsonString, JsonValue } from "./json";

const HEX = "0123456789abcdef";

// 1 for ASCII characters written as-is inside a string literal.
const PLAIN_ASCII: usize = memory.data<u8>([
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
]);

/** Appends `s` to `sb` as a JSON string literal, quotes included. */
export function appendQuoted(sb: StringBuilder, s: string): void {
  sb.appendCode(0x22);
  const base = changetype<usize>(s);
  const n = s.length;
  let run = 0; // start of the pending run of characters that need no escaping
  for (let i = 0; i < n; i++) {
    const c = <i32>load<u16>(base + (<usize>i << 1));
    // Common cases first: printable ASCII other than '"' and '\\'; any
    // other non-surrogate code unit.
    if (c < 0x80) {
      if (load<u8>(PLAIN_ASCII + <usize>c) != 0) continue;
    } else if (c < 0xd800 || c > 0xdfff) continue;
    let esc: i32 = 0x75; // the letter after the backslash; 'u' means \uXXXX
    if (c == 0x22 || c == 0x5c) esc = c;
    else if (c == 0x08) esc = 0x62;
    else if (c == 0x0c) esc = 0x66;
    else if (c == 0x0a) esc = 0x6e;
    else if (c == 0x0d) esc = 0x72;
    else if (c == 0x09) esc = 0x74;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n) {
      // A well-formed surrogate pair passes through; a lone half is escaped so
      // the output stays valid UTF-8 (and round-trips through any JSON parser).
      const d = <i32>load<u16>(base + (<usize>(i + 1) << 1));
      if (d >= 0xdc00 && d <= 0xdfff) {
        i++;
        continue;
      }
    }
    sb.appendRange(s, run, i);
    sb.appendCode(0x5c);
    sb.appendCode(esc);
    if (esc == 0x75) {
      sb.appendCode(HEX.charCodeAt((c >> 12) & 15));
      sb.appendCode(HEX.charCodeAt((c >> 8) & 15));
      sb.appendCode(HEX.charCodeAt((c >> 4) & 15));
      sb.appendCode(HEX.charCodeAt(c & 15));
    }
    run = i + 1;
  }
  sb.appendRange(s, run, n);
  sb.appendCode(0x22);
}

/** `s` as a JSON string literal, quotes included. */
export function quote(s: string): string {
  const sb = new StringBuilder(s.length + 2);
  appendQuoted(sb, s);
  return sb.toString();
}

/**
 * `x` as JSON number text: integral values below 2^53 print without a
 * fraction ("3", not "3.0"); NaN and ±Infinity, which JSON cannot express,
 * print as null.
 */
export function formatNumber(x: f64): string {
  if (!isFinite(x)) return "null";
  if (x == Math.floor(x) && Math.abs(x) < 9007199254740992.0) return (<i64>x).toString();
  return x.toString();
}

export class JsonWriter {
  private sb: StringBuilder;
  // One entry per open container: true until its first member is written.
  private first: Array<bool> = [];
  private afterKey: bool = false;

  constructor(initialCapacity: i32 = 256) {
    this.sb = new StringBuilder(initialCapacity);
  }

  /** Writes the separator a new value (or key) needs at this position. */
  private sep(): void {
    if (this.afterKey) {
      this.afterKey = false;
      return;
    }
    const depth = this.first.length;
    if (depth == 0) return;
    if (unchecked(this.first[depth - 1])) unchecked((this.first[depth - 1] = false));
    else this.sb.appendCode(0x2c);
  }

  beginObject(): JsonWriter {
    this.sep();
    this.sb.appendCode(0x7b);
    this.first.push(true);
    return this;
  }

  endObject(): JsonWriter {
    this.first.pop();
    this.sb.appendCode(0x7d);
    return this;
  }

  beginArray(): JsonWriter {
    this.sep();
    this.sb.appendCode(0x5b);
    this.first.push(true);
    return this;
  }

  endArray(): JsonWriter {
    this.first.pop();
    this.sb.appendCode(0x5d);
    return this;
  }

  /** Writes an object key; the next call writes its value. */
  key(name: string): JsonWriter {
    this.sep();
    appendQuoted(this.sb, name);
    this.sb.appendCode(0x3a);
    this.afterKey = true;
    return this;
  }

  string(s: string): JsonWriter {
    this.sep();
    appendQuoted(this.sb, s);
    return this;
  }

  number(x: f64): JsonWriter {
    this.sep();
    this.sb.append(formatNumber(x));
    return this;
  }

  int(x: i64): JsonWriter {
    this.sep();
    this.sb.append(x.toString());
    return this;
  }

  bool(b: bool): JsonWriter {
    this.sep();
    this.sb.append(b ? "true" : "false");
    return this;
  }

  nullValue(): JsonWriter {
    this.sep();
    this.sb.append("null");
    return this;
  }

  /** Writes a parsed value back out (numbers keep their original text). */
  value(v: JsonValue): JsonWriter {
    switch (v.kind) {
      case JsonKind.NULL:
        return this.nullValue();
      case JsonKind.BOOL:
        return this.bool(changetype<JsonBool>(v).value);
      case JsonKind.NUMBER:
        this.sep();
        this.sb.append(changetype<JsonNumber>(v).raw);
        return this;
      case JsonKind.STRING:
        return this.string(changetype<JsonString>(v).value);
      case JsonKind.ARRAY: {
        const items = changetype<JsonArray>(v).items();
        this.beginArray();
        for (let i = 0; i < items.length; i++) this.value(unchecked(items[i]));
        return this.endArray();
      }
      default: {
        const obj = changetype<JsonObject>(v);
        const keys = obj.keys();
        const values = obj.values();
        this.beginObject();
        for (let i = 0; i < keys.length; i++) {
          this.key(unchecked(keys[i]));
          this.value(unchecked(values[i]));
        }
        return this.endObject();
      }
    }
  }

  toString(): string {
    return this.sb.toString();
  }
}

/** Serialises a parsed value to JSON text. */
export function stringify(v: JsonValue): string {
  return new JsonWriter().value(v).toString();
}
