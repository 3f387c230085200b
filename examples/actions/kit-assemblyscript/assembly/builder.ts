// A growable UTF-16 buffer. Appending is amortised O(1), so building a large
// document costs linear time and memory (repeated `a + b` would be quadratic,
// and the stub runtime never frees the intermediate strings).

export class StringBuilder {
  private buf: usize;
  private cap: i32; // in UTF-16 code units
  private len: i32 = 0;

  constructor(initialCapacity: i32 = 64) {
    this.cap = initialCapacity > 8 ? initialCapacity : 8;
    this.buf = heap.alloc(<usize>this.cap << 1);
  }

  get length(): i32 {
    return this.len;
  }

  private reserve(extra: i32): void {
    const need = this.len + extra;
    if (need <= this.cap) return;
    let cap = this.cap << 1;
    if (cap < need) cap = need;
    this.buf = heap.realloc(this.buf, <usize>cap << 1);
    this.cap = cap;
  }

  /** Appends one UTF-16 code unit. */
  appendCode(code: i32): void {
    this.reserve(1);
    store<u16>(this.buf + (<usize>this.len << 1), <u16>code);
    this.len++;
  }

  append(s: string): void {
    this.appendRange(s, 0, s.length);
  }

  /** Appends `s.substring(start, end)` without creating the substring. */
  appendRange(s: string, start: i32, end: i32): void {
    const n = end - start;
    if (n <= 0) return;
    this.reserve(n);
    memory.copy(
      this.buf + (<usize>this.len << 1),
      changetype<usize>(s) + (<usize>start << 1),
      <usize>n << 1,
    );
    this.len += n;
  }

  toString(): string {
    return String.UTF16.decodeUnsafe(this.buf, <usize>this.len << 1);
  }
}
