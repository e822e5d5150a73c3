// The layout's boundaries (src/broker: workerd, its console script the browser; src/node: Node;
// src/shared: both), checked:
// each runtime's code type-checked on its own with only that runtime's types, then
// dependency-cruiser's rules (.dependency-cruiser.cjs): no cycles of files or of folders, neither
// side imports the other, the shared contract imports neither, and on the node side only the CLI
// (src/node/cli) knows the command line, and the agent's rooms (src/node/agent/*) import only
// the rooms below them. The checks run as many at once as there are cores, each one's output
// printed whole when it ends; exits non-zero when any failed.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { availableParallelism } from "node:os";
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
/** Runs one check; resolves with its exit status and everything it printed. */
function run([name, args]) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.on("error", (e) => resolve({ name, status: 1, out: `${out}${e.message}\n` }));
    child.on("close", (status) => resolve({ name, status: status ?? 1, out }));
  });
}

const queue = [...checks];
let failed = 0;
await Promise.all(
  Array.from({ length: Math.min(availableParallelism(), queue.length) }, async () => {
    for (let check = queue.shift(); check; check = queue.shift()) {
      const { name, status, out } = await run(check);
      process.stdout.write(`-- ${name}\n${out}`);
      if (status !== 0) {
        console.error(`boundaries: ${name} failed`);
        failed++;
      }
    }
  }),
);
process.exit(failed ? 1 : 0);
