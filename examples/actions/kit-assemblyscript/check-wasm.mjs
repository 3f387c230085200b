// Checks a built action against eventflow's upload rules (SPEC §6) that can be
// seen statically: no imports at all, and the ABI exports are present.
//
//   node check-wasm.mjs <module.wasm> [label]

import { readFileSync } from "node:fs";

const [path, label = path] = process.argv.slice(2);
if (!path) {
  console.error("usage: node check-wasm.mjs <module.wasm> [label]");
  process.exit(2);
}
const bytes = readFileSync(path);
const module = new WebAssembly.Module(bytes);
const imports = WebAssembly.Module.imports(module);
if (imports.length > 0) {
  const names = imports.map((i) => `${i.module}.${i.name}`).join(", ");
  console.error(`[${label}] error: the module imports ${names}; eventflow rejects any import`);
  process.exit(1);
}
const exports = WebAssembly.Module.exports(module).map((e) => `${e.name}:${e.kind}`);
for (const want of ["memory:memory", "execute:function", "alloc:function"]) {
  if (!exports.includes(want)) {
    console.error(`[${label}] error: missing export ${want}`);
    process.exit(1);
  }
}
if (exports.length > 64) {
  console.error(`[${label}] error: ${exports.length} exports (eventflow allows at most 64)`);
  process.exit(1);
}
console.log(`[${label}] ok: ${bytes.length} bytes, no imports, exports ${exports.sort().join(" ")}`);
