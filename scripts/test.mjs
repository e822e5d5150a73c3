// `npm test`: make sure the external tools are there, then run every test suite once.
import { spawnSync } from "node:child_process";
import { ensureTool } from "./tools.mjs";

process.env.ETCD_BIN = ensureTool("etcd");
process.env.SPIN_BIN = ensureTool("spin");
process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
process.env.WRANGLER_SEND_METRICS = "false";

const steps = [
  ["wrangler config and bundle", ["wrangler", "deploy", "--dry-run", "--outdir", ".wrangler/dry-run"]],
  ["type check", ["tsc", "--noEmit"]],
  ["tests", ["vitest", "run", ...process.argv.slice(2)]],
];

for (const [name, [cmd, ...args]] of steps) {
  console.log(`\n== ${name}: ${cmd} ${args.join(" ")}`);
  const r = spawnSync(cmd, args, { stdio: "inherit", env: process.env });
  if (r.status !== 0) {
    console.error(`\n== ${name} failed (exit ${r.status ?? r.signal})`);
    process.exit(r.status || 1);
  }
}
