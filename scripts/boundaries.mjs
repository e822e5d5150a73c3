// The layout's boundaries (src/broker: workerd, its console script the browser; src/node: Node;
// src/shared: both), checked:
// each runtime's code type-checked on its own with only that runtime's types, then
// dependency-cruiser's rules (.dependency-cruiser.cjs): no cycles of files or of folders, neither
// side imports the other, the shared contract imports neither, and on the node side only the CLI
// (src/node/cli) knows the command line. Exits non-zero on the first failure.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const tsc = require.resolve("typescript/bin/tsc");
const depcruise = join(import.meta.dirname, "../node_modules/dependency-cruiser/bin/dependency-cruiser.mjs");

const checks = [
  ["shared contract (no Workers or Node types)", [tsc, "--noEmit", "-p", "tsconfig.shared.json"]],
  ["broker (Workers types only)", [tsc, "--noEmit", "-p", "tsconfig.broker.json"]],
  ["node side (Node types only)", [tsc, "--noEmit", "-p", "tsconfig.node.json"]],
  ["console script (browser DOM types only)", [tsc, "--noEmit", "-p", "tsconfig.console.json"]],
  ["dependency rules (dependency-cruiser)", [depcruise, "src", "--config", ".dependency-cruiser.cjs", "--output-type", "err"]],
];
for (const [name, args] of checks) {
  console.log(`-- ${name}`);
  const r = spawnSync(process.execPath, args, { stdio: "inherit" });
  if (r.status !== 0) {
    console.error(`boundaries: ${name} failed`);
    process.exit(1);
  }
}
