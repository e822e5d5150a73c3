// `npm test`: make sure the external tools are there, then run every suite once and close with
// one summary line ("N passed, N failed").
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { ensureTool } from "./tools.mjs";

process.env.ETCD_BIN = ensureTool("etcd");
process.env.SPIN_BIN = ensureTool("spin");
process.env.SYSTEMD_ANALYZE_BIN = ensureTool("systemd-analyze");
process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
process.env.WRANGLER_SEND_METRICS = "false";

const extra = process.argv.slice(2);
const results = "test-results";
rmSync(results, { recursive: true, force: true });
mkdirSync(results, { recursive: true });
const vitest = (name, projects) => [
  "vitest",
  "run",
  ...projects.flatMap((p) => ["--project", p]),
  "--reporter=default",
  "--reporter=json",
  `--outputFile.json=${results}/${name}.json`,
  ...(extra.length ? ["--passWithNoTests", ...extra] : []),
];

const steps = [
  ["wrangler config and bundle", ["wrangler", "deploy", "--dry-run", "--outdir", ".wrangler/dry-run"]],
  ["type check", ["tsc", "--noEmit"]],
  ["model check of the join protocol (spin)", ["node", "scripts/model.mjs"]],
  // In-process suites first; then the real processes, alone, so their timing is not disturbed.
  ["unit and workerd tests", vitest("in-process", ["unit", "worker"])],
  ["end-to-end tests", vitest("e2e", ["e2e"])],
  // The parallel-join and fault scenarios again, with the broker under join-broker serve (workerd
  // from npm, state on local disk) instead of wrangler dev.
  // The Worker tests' HTTP contract (every route, every bad input) over loopback against serve.
  ["HTTP contract on join-broker serve", vitest("contract-serve", ["contract-serve"])],
  ["end-to-end scenarios on join-broker serve", [...vitest("e2e-serve", ["e2e"]), "test/e2e/cluster-parallel.test.ts", "test/e2e/cluster-faults.test.ts"], { JOIN_BROKER_E2E_RUNTIME: "serve" }],
];

let failedStep = null;
for (const [name, [cmd, ...args], env = {}] of steps) {
  console.log(`\n== ${name}: ${Object.entries(env).map(([k, v]) => `${k}=${v} `).join("")}${cmd} ${args.join(" ")}`);
  const r = spawnSync(cmd, args, { stdio: "inherit", env: { ...process.env, ...env } });
  if (r.status !== 0) {
    failedStep = `${name} (exit ${r.status ?? r.signal})`;
    break;
  }
}

let passed = 0;
let failed = 0;
for (const file of ["in-process", "e2e", "contract-serve", "e2e-serve"].map((n) => `${results}/${n}.json`).filter(existsSync)) {
  const report = JSON.parse(readFileSync(file, "utf8"));
  passed += report.numPassedTests ?? 0;
  // A file that fails to load fails no test, yet the run failed: count it.
  failed += report.numFailedTests || (report.success ? 0 : Math.max(1, report.numFailedTestSuites ?? 0));
}
if (failedStep) console.error(`\n== failed: ${failedStep}`);
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(failedStep ? 1 : 0);
