// `npm test`: make sure the external tools are there, then run every suite once and close with
// one summary line ("N passed, N failed").
import { spawn } from "node:child_process";
import { appendFileSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { ensureTool } from "./tools.mjs";
import { kubePin } from "./kube.mjs";
import { K0S_VERSIONS, k0sPin } from "./k0s.mjs";
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
// One version's step runs with the broker under join-broker serve (workerd from npm, state on
// local disk) instead of wrangler dev: the newest other than the primary. Without one, the
// parallel-join and fault scenarios run on serve as a step of their own.
const serveVersion = etcdVersions.filter((v) => v !== PRIMARY_ETCD_VERSION).at(-1) ?? null;
const serveEtcd = etcdVersions.includes(PRIMARY_ETCD_VERSION) ? PRIMARY_ETCD_VERSION : etcdVersions[etcdVersions.length - 1];

const SOURCE_CLI_ETCD_VERSION = "3.4";

const buildKube = etcdVersions.includes(PRIMARY_ETCD_VERSION) && extra.length === 0;
const KUBE_STEP = `Kubernetes ${kubePin().release}: kubeadm, kube-apiserver (in the background)`;
// The files that need the Kubernetes build: kubeadm on lab hosts, kubeadm's etcd CA directory under
// the agent and the join API, and the real kube-apiserver on the agent's etcd (auth on).
const KUBEADM_FILES = ["test/e2e/lab-kubeadm.test.ts", "test/e2e/kubeadm-ca.test.ts", "test/e2e/apiserver-etcd.test.ts"];
// k0s, built from the source archives in shared/k0s once per machine (scripts/k0s.mjs), runs
// kube-apiserver from the Kubernetes build above: its step waits for both.
const K0S_STEP = `k0s ${K0S_VERSIONS.map((v) => k0sPin(v).release).join(", ")} (in the background)`;
const K0S_FILE = "test/e2e/lab-k0s.test.ts";

const steps = [
  ["wrangler config and bundle", ["wrangler", "deploy", "--dry-run", "--outdir", ".wrangler/dry-run"]],
  ["type check", ["tsc", "--noEmit"]],
  ["boundaries: a type check per runtime, dependency rules", ["node", "scripts/boundaries.mjs"]],
  // Built from Go modules once per machine (Debian's package for 3.4): before any test needs one.
  ...etcdVersions.map((v) => [`etcd ${v}`, ["node", "scripts/etcd.mjs", "path", v]]),
  // kubeadm and kube-apiserver, built from k8s.io/kubernetes once per machine (scripts/kube.mjs),
  // for test/e2e/lab-kubeadm.test.ts and kubeadm-ca.test.ts. Cold, that is ~14 minutes of both cores: it runs beside the
  // steps below at the lowest CPU and I/O priority, taking only the time they leave idle, and the
  // kubeadm tests run last, after waiting for it.
  ...(buildKube ? [[KUBE_STEP, ["nice", "-n", "19", "ionice", "-c", "3", "node", "scripts/kube.mjs", "list"], {}, { background: true }]] : []),
  // k0s 1.28 and 1.36 (6 to 10 minutes each, cold), the same way, for test/e2e/lab-k0s.test.ts.
  ...(buildKube ? [[K0S_STEP, ["nice", "-n", "19", "ionice", "-c", "3", "node", "scripts/k0s.mjs", "list"], {}, { background: true }]] : []),
  // What the package's command runs (bin/join-broker), fresh: the end-to-end tests spawn it.
  ["the CLI build (dist/cli)", ["node", "scripts/build-cli.mjs"]],
  // The single executable files (dist/release): test/e2e/single-executable.test.ts runs them.
  ["the single executable files (dist/release)", ["node", "scripts/package.mjs"]],
  // No timing in it: beside the tests at the lowest priority, waited for at the end.
  ["model check of the join protocol (spin, in the background)", ["nice", "-n", "19", "node", "scripts/model.mjs"], {}, { background: true }],
  ["Go verifier module: go vet, go test (integrations/go)", ["node", "scripts/go-test.mjs"]],
  ["OpenAPI document lint (Redocly, recommended rules)", ["node", "scripts/openapi.mjs", "lint", `${results}/openapi.json`]],
  // In-process suites first; then the real processes, alone, so their timing is not disturbed.
  ["unit and workerd tests", vitest("in-process", ["unit", "worker"])],
  ...etcdVersions.map((v) => [
    `end-to-end tests on etcd ${v}${ETCD_MATRIX[v] ? "" : buildKube ? " (every file but the kubeadm, kube-apiserver and k0s tests)" : " (every file)"}${v === serveVersion ? ", broker on join-broker serve" : ""}`,
    // The kubeadm and k0s tests are steps of their own, last.
    [...vitest(`e2e-etcd-${v}`, ["e2e"], ETCD_MATRIX[v]), ...(!ETCD_MATRIX[v] && buildKube ? [...KUBEADM_FILES, K0S_FILE].flatMap((f) => ["--exclude", f]) : [])],
    // One version's processes run the TypeScript sources (as a checkout with edits does), the
    // others the build (as an installed package does).
    { E2E_ETCD_VERSION: v, ...(v === SOURCE_CLI_ETCD_VERSION ? { JOIN_BROKER_LAUNCH: "source" } : {}), ...(v === serveVersion ? { JOIN_BROKER_E2E_RUNTIME: "serve" } : {}) },
  ]),
  // The Worker tests' HTTP contract (every route, every bad input) over loopback against serve.
  ["HTTP contract on join-broker serve", vitest("contract-serve", ["contract-serve"])],
  ...(serveVersion
    ? []
    : [[
        `end-to-end scenarios on join-broker serve (etcd ${serveEtcd})`,
        vitest("e2e-serve", ["e2e"], ["test/e2e/cluster-parallel.test.ts", "test/e2e/cluster-faults.test.ts"]),
        { JOIN_BROKER_E2E_RUNTIME: "serve", E2E_ETCD_VERSION: serveEtcd },
      ]]),
  // The unmodified kubeadm on lab hosts (etcd from scripts/kube-versions.json), once the background build is done.
  ...(buildKube
    ? [[`kubeadm on lab hosts, its etcd CA directory under the agent and the join API, and kube-apiserver on the agent's etcd (Kubernetes ${kubePin().release}, etcd ${kubePin().etcd})`, vitest("e2e-kubeadm", ["e2e"], KUBEADM_FILES), { E2E_ETCD_VERSION: PRIMARY_ETCD_VERSION }, { after: KUBE_STEP }]]
    : []),
  // Real k0s controllers on lab hosts (the seed's split brain without the broker, none through
  // it), once its background build is done (kube-apiserver's was waited for just above).
  ...(buildKube
    ? [[`k0s on lab hosts (${K0S_VERSIONS.map((v) => `k0s ${v} with etcd ${k0sPin(v).etcd}`).join("; ")})`, vitest("e2e-k0s", ["e2e"], [K0S_FILE]), { E2E_ETCD_VERSION: PRIMARY_ETCD_VERSION }, { after: K0S_STEP }]]
    : []),
];

let failedStep = null;
const timings = [];
/** Steps started in the background: name → { done: Promise<exit status>, started, ended, log, child }. */
const background = new Map();
const seconds = (from) => Math.round((Date.now() - from) / 1000);

/** Waits for a background step; prints its output; false (and records the failure) if it failed. */
async function finish(name) {
  const job = background.get(name);
  background.delete(name);
  const waitFrom = Date.now();
  console.log(`\n== waiting for: ${name} (started ${seconds(job.started)} s ago; its output: ${job.log})`);
  const status = await job.done;
  console.log(readFileSync(job.log, "utf8").trimEnd());
  timings.push(`${name}: ${Math.round((job.ended - job.started) / 1000)} s, of which ${seconds(waitFrom)} s waited for`);
  if (status !== 0) failedStep = `${name} (exit ${status})`;
  return status === 0;
}

for (const [name, [cmd, ...args], env = {}, options = {}] of steps) {
  if (options.after && background.has(options.after) && !(await finish(options.after))) break;
  const shown = `${Object.entries(env).map(([k, v]) => `${k}=${v} `).join("")}${cmd} ${args.join(" ")}`;
  if (options.background) {
    const log = `${results}/${name.replace(/[^A-Za-z0-9.]+/g, "-").replace(/^-|-$/g, "")}.log`;
    console.log(`\n== started in the background: ${name}: ${shown} (output: ${log})`);
    const out = openSync(log, "w");
    // Its own process group, so stopping it stops the compilers it started too.
    const child = spawn(cmd, args, { stdio: ["ignore", out, out], env: { ...process.env, ...env }, detached: true });
    closeSync(out);
    const job = { started: Date.now(), ended: 0, log, child };
    job.done = new Promise((resolve) => {
      child.on("exit", (code, signal) => ((job.ended = Date.now()), resolve(code ?? signal)));
      child.on("error", (e) => (appendFileSync(log, `${e}\n`), (job.ended = Date.now()), resolve(1)));
    });
    background.set(name, job);
    continue;
  }
  console.log(`\n== ${name}: ${shown}`);
  const started = Date.now();
  // Asynchronous, so a background step's exit is noticed meanwhile.
  const status = await new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: "inherit", env: { ...process.env, ...env } });
    child.on("exit", (code, signal) => resolve(code ?? signal));
    child.on("error", () => resolve(1));
  });
  timings.push(`${name}: ${seconds(started)} s`);
  if (status !== 0) {
    failedStep = `${name} (exit ${status})`;
    break;
  }
}
// Background steps no step waited for are waited for now, unless the run already failed.
for (const name of [...background.keys()]) {
  if (failedStep) break;
  await finish(name);
}
// What is left (the run stopped early) is stopped.
for (const [, job] of background) {
  try {
    process.kill(-job.child.pid, "SIGTERM");
  } catch {
    // Already gone.
  }
}

let passed = 0;
let failed = 0;
// Only vitest's reports: other steps write JSON here too (the OpenAPI document).
const reports = existsSync(results)
  ? readdirSync(results).filter((f) => /^(in-process|e2e-etcd-.+|contract-serve|e2e-serve|e2e-kubeadm|e2e-k0s)\.json$/.test(f)).map((f) => `${results}/${f}`)
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
