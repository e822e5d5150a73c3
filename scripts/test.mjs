// `npm test`: make sure the external tools are there, then run every suite once and close with
// one summary line ("N passed, N failed").
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { ensureTool } from "./tools.mjs";
import { ETCD_MATRIX, PRIMARY_ETCD_VERSION, etcdVersionsToRun } from "../test/support/etcd-matrix.mjs";

process.env.ETCD_BIN = ensureTool("etcd");
process.env.SPIN_BIN = ensureTool("spin");
process.env.ETCDCTL_BIN = ensureTool("etcdctl");
process.env.CHROMIUM_BIN = ensureTool("chromium");
process.env.SYSTEMD_ANALYZE_BIN = ensureTool("systemd-analyze");
process.env.PROMTOOL_BIN = ensureTool("promtool");
process.env.QEMU_AARCH64_BIN = ensureTool("qemu-aarch64-static");
// The lab (test/lab/, docs/lab.md): nftables for partitions and loss, libfaketime for skewed clocks.
process.env.NFT_BIN = ensureTool("nft");
process.env.FAKETIME_BIN = ensureTool("faketime");
ensureTool("openssl");
process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
process.env.WRANGLER_SEND_METRICS = "false";

const extra = process.argv.slice(2);
const results = "test-results";
rmSync(results, { recursive: true, force: true });
mkdirSync(results, { recursive: true });
const vitest = (name, projects, files = null) => [
  "vitest",
  "run",
  ...projects.flatMap((p) => ["--project", p]),
  "--reporter=default",
  "--reporter=json",
  `--outputFile.json=${results}/${name}.json`,
  // Arguments given to `npm test` choose the files (on every etcd version); else the matrix does.
  ...(extra.length ? ["--passWithNoTests", ...extra] : (files ?? [])),
];

// The etcd versions the end-to-end tests run on (all, or $E2E_ETCD_VERSIONS), and which files each
// runs: test/support/etcd-matrix.mjs.
const etcdVersions = etcdVersionsToRun();
// The scenarios on join-broker serve run on one etcd version: the primary one when it is in the run.
const serveEtcd = etcdVersions.includes(PRIMARY_ETCD_VERSION) ? PRIMARY_ETCD_VERSION : etcdVersions[etcdVersions.length - 1];

const SOURCE_CLI_ETCD_VERSION = "3.4";

const steps = [
  ["wrangler config and bundle", ["wrangler", "deploy", "--dry-run", "--outdir", ".wrangler/dry-run"]],
  ["type check", ["tsc", "--noEmit"]],
  ["boundaries: a type check per runtime, dependency rules", ["node", "scripts/boundaries.mjs"]],
  // Built from Go modules once per machine (Debian's package for 3.4): before any test needs one.
  ...etcdVersions.map((v) => [`etcd ${v}`, ["node", "scripts/etcd.mjs", "path", v]]),
  // What the package's command runs (bin/join-broker), fresh: the end-to-end tests spawn it.
  ["the CLI build (dist/cli)", ["node", "scripts/build-cli.mjs"]],
  // The single executable files (dist/release): test/e2e/single-executable.test.ts runs them.
  ["the single executable files (dist/release)", ["node", "scripts/package.mjs"]],
  ["model check of the join protocol (spin)", ["node", "scripts/model.mjs"]],
  ["Go verifier module: go vet, go test (integrations/go)", ["node", "scripts/go-test.mjs"]],
  ["OpenAPI document lint (Redocly, recommended rules)", ["node", "scripts/openapi.mjs", "lint", `${results}/openapi.json`]],
  // In-process suites first; then the real processes, alone, so their timing is not disturbed.
  ["unit and workerd tests", vitest("in-process", ["unit", "worker"])],
  ...etcdVersions.map((v) => [
    `end-to-end tests on etcd ${v}${ETCD_MATRIX[v] ? "" : " (every file)"}`,
    vitest(`e2e-etcd-${v}`, ["e2e"], ETCD_MATRIX[v]),
    // One version's processes run the TypeScript sources (as a checkout with edits does), the
    // others the build (as an installed package does).
    { E2E_ETCD_VERSION: v, ...(v === SOURCE_CLI_ETCD_VERSION ? { JOIN_BROKER_LAUNCH: "source" } : {}) },
  ]),
  // The Worker tests' HTTP contract (every route, every bad input) over loopback against serve.
  ["HTTP contract on join-broker serve", vitest("contract-serve", ["contract-serve"])],
  // The parallel-join and fault scenarios again, with the broker under join-broker serve (workerd
  // from npm, state on local disk) instead of wrangler dev; on one etcd version.
  [
    `end-to-end scenarios on join-broker serve (etcd ${serveEtcd})`,
    vitest("e2e-serve", ["e2e"], ["test/e2e/cluster-parallel.test.ts", "test/e2e/cluster-faults.test.ts"]),
    { JOIN_BROKER_E2E_RUNTIME: "serve", E2E_ETCD_VERSION: serveEtcd },
  ],
];

let failedStep = null;
const timings = [];
for (const [name, [cmd, ...args], env = {}] of steps) {
  console.log(`\n== ${name}: ${Object.entries(env).map(([k, v]) => `${k}=${v} `).join("")}${cmd} ${args.join(" ")}`);
  const started = Date.now();
  const r = spawnSync(cmd, args, { stdio: "inherit", env: { ...process.env, ...env } });
  timings.push(`${name}: ${Math.round((Date.now() - started) / 1000)} s`);
  if (r.status !== 0) {
    failedStep = `${name} (exit ${r.status ?? r.signal})`;
    break;
  }
}

let passed = 0;
let failed = 0;
// Only vitest's reports: other steps write JSON here too (the OpenAPI document).
const reports = existsSync(results)
  ? readdirSync(results).filter((f) => /^(in-process|e2e-etcd-.+|contract-serve|e2e-serve)\.json$/.test(f)).map((f) => `${results}/${f}`)
  : [];
for (const file of reports) {
  const report = JSON.parse(readFileSync(file, "utf8"));
  passed += report.numPassedTests ?? 0;
  // A file that fails to load fails no test, yet the run failed: count it.
  failed += report.numFailedTests || (report.success ? 0 : Math.max(1, report.numFailedTestSuites ?? 0));
}
console.log(`\n== time per step\n${timings.join("\n")}`);
if (failedStep) console.error(`\n== failed: ${failedStep}`);
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(failedStep ? 1 : 0);
