// eventflow AssemblyScript action kit: the guest ABI (SPEC §6) plus a small
// JSON reader and writer. See ../README.md.

export {
  alloc,
  codePointCount,
  Envelope,
  parseDecimalInt,
  readEnvelope,
  readInput,
  REJECT,
  returnJson,
  trimAscii,
  truncateCodePoints,
} from "./abi";
export { StringBuilder } from "./builder";
export {
  JsonArray,
  JsonBool,
  JsonDocument,
  JsonKind,
  JsonNull,
  JsonNumber,
  JsonObject,
  JsonString,
  JsonValue,
  MAX_DEPTH,
  parseJson,
  parseJsonBytes,
} from "./json";
export { appendQuoted, formatNumber, JsonWriter, quote, stringify } from "./writer";
