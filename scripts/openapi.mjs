// `node scripts/openapi.mjs [lint] [OUT]`: writes the broker's OpenAPI document (what
// GET /openapi.json serves) to OUT (default test-results/openapi.json); with `lint`, then checks
// it with Redocly's recommended rules and fails on any error.
import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { tsImport } from "tsx/esm/api";

const args = process.argv.slice(2);
const lint = args[0] === "lint";
const out = resolve(args[lint ? 1 : 0] ?? "test-results/openapi.json");

const { app } = await tsImport("../src/broker/app.ts", import.meta.url);
const res = await app.request("/openapi.json");
if (res.status !== 200) throw new Error(`GET /openapi.json answered ${res.status}`);
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, JSON.stringify(await res.json(), null, 2) + "\n");
console.log(`wrote ${out}`);

if (lint) {
  // The project's own Redocly, whether or not npm put node_modules/.bin on PATH.
  const redocly = resolve(import.meta.dirname, "../node_modules/.bin/redocly");
  const r = spawnSync(redocly, ["lint", "--config", resolve(import.meta.dirname, "../redocly.yaml"), "--format", "stylish", out], { stdio: "inherit" });
  if (r.error) console.error(`cannot run ${redocly}: ${r.error.message} (run npm install first)`);
  else if (r.status === null) console.error(`redocly was ended by ${r.signal}`);
  process.exit(r.status ?? 1);
}
