// `npm test [-- FILE|FILTER… | -t NAME]`: every check and suite, or just the named test files
// after only the builds they need; `npm run test:quick` (this script with --quick): types,
// boundaries, unit and workerd tests, no builds. Ends with a table of its steps (start, seconds,
// tests passed and failed), the 20 slowest tests, and one line "N passed, N failed".
//
// A small scheduler. Each task (a build that provisions something, or a check) runs in a lane,
// one task at a time per lane in the order listed, once every build it needs is done; lanes run
// side by side. The builds (etcd, Kubernetes, the single executable files; each cached per
// machine under ~/.cache/etcd-join-broker by its script) start at once, and each step waits only
// for what it uses. Priorities: the end-to-end tests (which wait on etcd far more than they
// compute) at the normal one, the builds the tests wait for below them, the long Kubernetes and
// k0s builds lowest (nice 19, idle I/O), and the checks nothing waits for (the static checks, the
// Go module's tests, the model check) in the idle CPU class: while the long builds, the run's
// last steps to end, still want the CPU, those take none of it.
// Every task's output is printed as it comes, each line tagged with the task, and kept in
// test-results/<task>.log; a failed task does not stop the others (those needing a failed build
// do not run). docs/testing.md explains the choices and the numbers.
import { spawn } from "node:child_process";
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { STEP_MARKER, stopMarkedProcesses } from "./leftovers.mjs";
import { stepTmpDirs } from "./step-tmp.mjs";
import { ensureTool } from "./tools.mjs";
import { etcdPin } from "./etcd.mjs";
import { kubePin } from "./kube.mjs";
import { K0S_VERSIONS, k0sPin, k0sVariants } from "./k0s.mjs";
import { failures, fileDurations, projectTotals, readReport, recordDurations, slowestFiles, slowestTests, sortKeys } from "./test-report.mjs";
import { etcdVersionsToRun } from "../test/support/etcd-matrix.mjs";
import { CONTRACT_FILES, OWN_STEP_FILES, e2eProjects, etcdJob, fileBuilds, k0sJob, projectRuns, suiteOf } from "../test/support/test-plan.mjs";

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));
process.chdir(ROOT);
const RESULTS = "test-results";
const TIME = existsSync("/usr/bin/time") ? "/usr/bin/time" : null;
const cpuFile = (task) => `${RESULTS}/${task.id}.cpu`;
const REPORTER = "./scripts/test-report.mjs";

// ------------------------------------------------------------------------------ what to run

const USAGE = `Usage: npm test [-- FILE|DIR|PART-OF-A-PATH… [-t NAME] [other vitest flags]]
       npm run test:quick

  npm test                 every check and suite (what CI runs), builds first in the background
  npm test -- FILE…        just those test files, after only the builds they need; an end-to-end
                           file runs on the etcd versions whose list holds it
  npm run test:quick       type check, boundaries, unit and workerd tests: no builds, no tools

Environment: E2E_ETCD_VERSIONS=3.5,3.7 (only those versions), E2E_K0S_VERSIONS=1.36 (only that k0s
release in the k0s files), E2E_WORKERS=N (end-to-end files at
once, default 4), KEEP_E2E_DIR=1, E2E_SEED=N. docs/testing.md has the whole of it.`;

const argv = process.argv.slice(2);
if (argv.includes("--help") || argv.includes("-h")) {
  console.log(USAGE);
  process.exit(0);
}
const quick = argv[0] === "--quick";
const { files, vitestArgs } = parseArguments(quick ? argv.slice(1) : argv);
const selected = files !== null;

/**
 * Test files named (or matched, as vitest matches a filter: a path or part of one) by the
 * arguments, and the arguments passed to vitest as they are (flags, and `-t`'s value).
 */
function parseArguments(args) {
  const all = testFiles();
  const matched = new Set();
  const passed = [];
  let anyFilter = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg.startsWith("-")) {
      passed.push(arg);
      if (["-t", "--testNamePattern"].includes(arg) && i + 1 < args.length) passed.push(args[++i]);
      continue;
    }
    anyFilter = true;
    const path = relative(ROOT, resolve(arg));
    const hits =
      existsSync(arg) && statSync(arg).isDirectory() ? all.filter((f) => f.startsWith(`${path}/`)) : all.filter((f) => f === path || f.includes(arg));
    if (hits.length === 0) fail(`no test file matches ${arg}`);
    for (const f of hits) matched.add(f);
  }
  return { files: anyFilter ? [...matched].sort() : null, vitestArgs: passed };
}

/** Every test file of the suites (vitest.config.ts's include patterns), relative to the repository. */
function testFiles() {
  const out = [];
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path);
      else if (suiteOf(path)) out.push(path);
    }
  };
  walk("src");
  walk("test");
  return out.sort();
}

function fail(message) {
  console.error(`npm test: ${message}\n\n${USAGE}`);
  process.exit(2);
}

const byProject = (suite) => (files ?? []).filter((f) => suiteOf(f) === suite);
const inProcessProjects = quick || !selected ? ["unit", "worker"] : ["unit", "worker"].filter((p) => byProject(p).length);
const e2eFiles = byProject("e2e");
const contractSelected = !quick && (!selected || byProject("worker").some((f) => CONTRACT_FILES.includes(f)));

// The e2e projects of this run (test/support/test-plan.mjs), and the ones that are steps of their own.
const allProjects = quick ? [] : e2eProjects();
const versionsChosen = !!process.env.E2E_ETCD_VERSIONS;
const runs = (p) => !selected || e2eFiles.some((f) => projectRuns(p, f));
const ownStep = (p) => p.include.every((f) => OWN_STEP_FILES.includes(f));
const matrixProjects = allProjects.filter((p) => !ownStep(p) && runs(p));
const ownStepProjects = allProjects.filter((p) => ownStep(p) && runs(p));
// Named files no chosen version's list holds: with E2E_ETCD_VERSIONS given, they run on each of those versions anyway.
const unplaced = e2eFiles.filter((f) => !OWN_STEP_FILES.includes(f) && !allProjects.some((p) => projectRuns(p, f)));
if (unplaced.length && !versionsChosen) fail(`no etcd version's list runs ${unplaced.join(", ")} (test/support/etcd-matrix.mjs)`);
const unplacedVersions = unplaced.length ? etcdVersionsToRun() : [];

// ------------------------------------------------------------------------------ the tasks

const nodeCmd = (script, ...args) => [process.execPath, script, ...args];
const vitest = (id, projects, extraFiles, env = {}) => ({
  cmd: [
    join(ROOT, "node_modules/.bin/vitest"),
    "run",
    ...projects.flatMap((p) => ["--project", p]),
    "--reporter=default",
    `--reporter=${REPORTER}`,
    "--reporter=json",
    `--outputFile.json=${RESULTS}/${id}.json`,
    ...vitestArgs,
    ...extraFiles.map((f) => join(ROOT, f)),
  ],
  env: { ...env, JOIN_BROKER_TEST_REPORT: `${RESULTS}/${id}.report.json` },
  report: `${RESULTS}/${id}.report.json`,
});

/** The builds: what some check needs, provisioned (and cached per machine) by its script. */
const builds = [
  { id: "cli", title: "the CLI build (dist/cli)", cmd: nodeCmd("scripts/build-cli.mjs"), lane: "cli" },
  // The tests' judge of certificates (Go's crypto/x509, as etcd judges them): a small Go build,
  // first, since the unit tests use it too.
  { id: "certcheck", title: "certcheck (integrations/go/cmd/certcheck)", cmd: nodeCmd("scripts/build-certcheck.mjs"), lane: "go" },
  // Debian's 3.4 is only checked (or installed); 3.5 and later are built from Go modules once per
  // machine, the primary version first: most files run on it.
  ...["3.6", "3.7", "3.5", "3.4"].map((v) => ({
    id: etcdJob(v),
    title: etcdPin(v).source === "debian" ? `etcd ${v} (Debian's ${etcdPin(v).package})` : `etcd ${etcdPin(v).release} (from its Go modules)`,
    cmd: nodeCmd("scripts/etcd.mjs", "path", v),
    lane: "go",
  })),
  // The single executable files (dist/release) for test/e2e/single-executable.test.ts and agent-units.
  { id: "package", title: "the single executable files (dist/release)", cmd: nodeCmd("scripts/package.mjs"), lane: "package" },
  // kubeadm and kube-apiserver (and the etcd that kubeadm deploys), for the kubeadm step. Cold,
  // minutes of both cores: at the lowest CPU and I/O priority, taking what the tests leave idle,
  // from the start in a lane of its own (behind the etcd builds it was the run's last step to end).
  {
    id: "kube",
    title: `Kubernetes ${kubePin().release}: kubeadm, kube-apiserver, etcd ${kubePin().etcd}`,
    cmd: nodeCmd("scripts/kube.mjs", "list"),
    lane: "kube",
    nice: 19,
    idleIo: true,
  },
  // k0s 1.28 and 1.36 from the source archives beside the repository (6 to 18 minutes each, cold),
  // for the k0s steps: the same way, beside Kubernetes, one build after the other in a lane of
  // their own: a release, then its patched variants (integrations/k0s/<version>/<variant>/: the
  // `broker` variant's join API checks the admission; seconds to a minute each once the release is
  // built), then the next release. A job per build, so a release's own step starts without
  // waiting for its variants: the last release's step is what ends a cold run.
  ...K0S_VERSIONS.flatMap((v) =>
    [null, ...k0sVariants(v)].map((variant) => ({
      id: k0sJob(v, variant),
      title: `k0s ${k0sPin(v).release}${variant ? ` +${variant} (patched, from source)` : " (from source)"}`,
      cmd: nodeCmd("scripts/k0s.mjs", "path", variant ? `${v}+${variant}` : v),
      lane: "k0s",
      nice: 19,
      idleIo: true,
    })),
  ),
];

const e2eNeeds = [
  ...new Set([
    ...matrixProjects.flatMap((p) => p.needs),
    ...(contractSelected ? ["cli"] : []),
    ...fileBuilds(selected ? e2eFiles : ["test/e2e/single-executable.test.ts"]),
    ...unplacedVersions.flatMap((v) => ["cli", "certcheck", etcdJob(v)]),
  ]),
];
const e2eRunProjects = [...matrixProjects.map((p) => p.name), ...(contractSelected ? ["contract-serve"] : [])];
const e2eFilesOf = (projects) => (selected ? e2eFiles.filter((f) => projects.some((p) => projectRuns(p, f))) : []);
const contractFiles = selected ? byProject("worker").filter((f) => CONTRACT_FILES.includes(f)) : [];

/**
 * The quick loop's share of the model-based tests' random sequences (test/worker/model-based.test.ts
 * runs 1000 and 15, three minutes of CPU on their own): a quarter; `npm test` runs them all.
 */
const QUICK_MODEL_SHARE = 0.25;

/** The checks, in each lane's order. */
const checks = quick
  ? [
      // The tests at the normal priority (each has a time bound), the type checks beside them below it.
      { id: "types", title: "type check", cmd: ["tsc", "--noEmit"], lane: "types", nice: 10 },
      {
        id: "boundaries",
        title: "boundaries: a type check per runtime, dependency rules",
        cmd: nodeCmd("scripts/boundaries.mjs"),
        lane: "boundaries",
        nice: 10,
      },
      // The formatter's check and the linter (biome.json): no file differs from its formatted form.
      { id: "format", title: "format and lint (Biome)", cmd: ["biome", "ci", "--colors=off", "."], lane: "boundaries", nice: 10 },
      {
        id: "in-process",
        title: `unit and workerd tests (${QUICK_MODEL_SHARE * 100} % of the model-based sequences)`,
        ...vitest("in-process", inProcessProjects, [], { VITE_MBT_SHARE: process.env.VITE_MBT_SHARE ?? String(QUICK_MODEL_SHARE) }),
        lane: "in-process",
        nice: 0,
        tests: true,
      },
    ]
  : [
      ...(selected
        ? []
        : [
            {
              id: "wrangler",
              title: "wrangler config and bundle",
              cmd: ["wrangler", "deploy", "--dry-run", "--outdir", ".wrangler/dry-run"],
              lane: "checks",
              idleCpu: true,
            },
            // The Workers runtime's types, generated from wrangler.toml and the pinned workerd (npm run cf-typegen).
            {
              id: "worker-types",
              title: "Worker types up to date (wrangler types --check)",
              cmd: ["wrangler", "types", "--check", "src/broker/worker-configuration.d.ts"],
              lane: "checks",
              idleCpu: true,
            },
            { id: "types", title: "type check", cmd: ["tsc", "--noEmit"], lane: "checks", idleCpu: true },
            {
              id: "boundaries",
              title: "boundaries: a type check per runtime, dependency rules",
              cmd: nodeCmd("scripts/boundaries.mjs"),
              lane: "checks",
              idleCpu: true,
            },
            { id: "format", title: "format and lint (Biome)", cmd: ["biome", "ci", "--colors=off", "."], lane: "checks", idleCpu: true },
            {
              id: "openapi",
              title: "OpenAPI document lint (Redocly, recommended rules)",
              cmd: nodeCmd("scripts/openapi.mjs", "lint", `${RESULTS}/openapi.json`),
              lane: "checks",
              idleCpu: true,
            },
          ]),
      // CPU-bound, with each test's time bounded: at the normal priority, in a lane of its own,
      // one file at a time (vitest.config.ts: IN_PROCESS_WORKERS).
      ...(inProcessProjects.length
        ? [
            {
              id: "in-process",
              title: "unit and workerd tests",
              ...vitest("in-process", inProcessProjects, [...byProject("unit"), ...byProject("worker")], { IN_PROCESS_WORKERS: "1" }),
              lane: "in-process",
              needs: ["certcheck"],
              nice: 0,
              tests: true,
            },
          ]
        : []),
      ...(selected
        ? []
        : [
            // The two checks nothing waits for and no clock bounds (each spin search is bounded by CPU
            // time), in the idle class after the last build: a cold run is CPU-bound until its last
            // build ends and then runs lab steps that leave a core idle, so their few minutes of CPU
            // (about 230 s, the model's 190) no longer delay that build and fit beside those steps.
            {
              id: "go-test",
              title: "Go verifier module: go vet, go test (integrations/go)",
              cmd: nodeCmd("scripts/go-test.mjs"),
              lane: "checks",
              idleCpu: true,
              afterBuilds: true,
            },
            {
              id: "model",
              title: "model check of the join protocol (spin)",
              cmd: nodeCmd("scripts/model.mjs"),
              lane: "model",
              idleCpu: true,
              idleIo: true,
              afterBuilds: true,
            },
          ]),
      ...(e2eRunProjects.length
        ? [
            {
              id: "e2e",
              title: `end-to-end tests (${[...matrixProjects.map((p) => p.name.replace(/^e2e-/, "")), ...(contractSelected ? ["the HTTP contract on join-broker serve"] : [])].join(", ")})`,
              ...vitest("e2e", e2eRunProjects, [...e2eFilesOf(matrixProjects), ...contractFiles], { JOIN_BROKER_TEST_MATRIX: "1" }),
              lane: "e2e",
              needs: e2eNeeds,
              nice: 0,
              tests: true,
              projects: Object.fromEntries([...matrixProjects.map((p) => [p.name, p.title]), ["contract-serve", "HTTP contract on join-broker serve"]]),
            },
          ]
        : []),
      // Named files no chosen version's list runs: on each chosen version, after the rest.
      ...unplacedVersions.map((v) => ({
        id: `e2e-${v}-named`,
        title: `the named end-to-end files on etcd ${v}`,
        ...vitest(`e2e-${v}-named`, ["e2e"], unplaced, { E2E_ETCD_VERSION: v }),
        lane: "e2e",
        needs: ["cli", "certcheck", etcdJob(v), ...fileBuilds(unplaced)],
        nice: 0,
        tests: true,
      })),
      // Steps that wait for a long build of their own, and for the end-to-end step to end (however
      // it ends): on a machine with every build cached they would otherwise start beside it and the
      // in-process tests, dozens of etcd, kube-apiserver and k0s processes at once (a load of 30 on
      // 2 cores, where the lab's checks through its gateway timed out). A cold run builds for longer
      // than the end-to-end step takes, so there this waits for nothing.
      ...ownStepProjects.map((p) => ({
        id: p.name,
        title: p.name === "e2e-kubeadm" ? `${p.title} (Kubernetes ${kubePin().release}, its etcd ${kubePin().etcd})` : p.title,
        ...vitest(p.name, [p.name], e2eFilesOf([p]), { JOIN_BROKER_TEST_MATRIX: "1" }),
        lane: p.lane ?? p.name,
        needs: p.needs,
        after: e2eRunProjects.length ? ["e2e"] : [],
        nice: 0,
        tests: true,
      })),
    ];

// Only the builds something needs, each after what it needs itself.
const needed = new Set(checks.flatMap((c) => c.needs ?? []));
const tasks = [
  ...builds.filter((b) => needed.has(b.id)).map((b) => ({ nice: 0, ...b, kind: "build" })),
  ...checks.map((c) => ({ nice: 10, ...c, kind: "check" })),
];
const buildIds = tasks.filter((t) => t.kind === "build").map((t) => t.id);
for (const t of tasks) if (t.afterBuilds) t.after = [...(t.after ?? []), ...buildIds];
for (const t of tasks)
  for (const n of [...(t.needs ?? []), ...(t.after ?? [])]) if (!tasks.some((x) => x.id === n)) throw new Error(`${t.id} waits for ${n}, which is no task`);

// ------------------------------------------------------------------------------ the tools

if (!quick) {
  process.env.ETCD_BIN = ensureTool("etcd");
  process.env.ETCDCTL_BIN = ensureTool("etcdctl");
  process.env.SPIN_BIN = ensureTool("spin");
  process.env.CHROMIUM_BIN = ensureTool("chromium");
  process.env.SYSTEMD_ANALYZE_BIN = ensureTool("systemd-analyze");
  process.env.PROMTOOL_BIN = ensureTool("promtool");
  process.env.QEMU_AARCH64_BIN = ensureTool("qemu-aarch64-static");
  // The lab (test/lab/, docs/lab.md): nftables for partitions and loss, libfaketime for skewed clocks.
  process.env.NFT_BIN = ensureTool("nft");
  process.env.FAKETIME_BIN = ensureTool("faketime");
  ensureTool("openssl");
}
process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
process.env.WRANGLER_SEND_METRICS = "false";
// The project's commands (tsc, wrangler, vitest) whether or not npm put node_modules/.bin on PATH.
process.env.PATH = `${join(ROOT, "node_modules/.bin")}:${process.env.PATH}`;

// ------------------------------------------------------------------------------ running them

rmSync(RESULTS, { recursive: true, force: true });
mkdirSync(RESULTS, { recursive: true });
// Each step's TMPDIR is its own, removed when it ends (scripts/step-tmp.mjs), unless
// KEEP_E2E_DIR asks to keep what the tests made.
const keepTmp = !!process.env.KEEP_E2E_DIR;
const stepTmp = stepTmpDirs();
const started = Date.now();
const secondsSince = (t) => Math.round((Date.now() - t) / 1000);
let lastOutput = Date.now();

/** id → { task, state: "pending" | "running" | "ok" | "failed" | "not run", start, end, child, why } */
const state = new Map(tasks.map((t) => [t.id, { task: t, state: "pending", start: 0, end: 0, child: null, why: "" }]));
const lanes = [...new Set(tasks.map((t) => t.lane))];
const done = (s) => s.state === "ok" || s.state === "failed" || s.state === "not run";
let finish;
const finished = new Promise((r) => (finish = r));

function say(line) {
  lastOutput = Date.now();
  process.stdout.write(`${line}\n`);
}

/**
 * Starts what can start: per lane, its next task once the tasks it runs after have ended and its
 * builds are done; a task whose build failed does not run.
 */
function pump() {
  for (const lane of lanes) {
    for (const s of state.values()) {
      if (s.task.lane !== lane || done(s)) continue;
      if (s.state === "running") break;
      // Tasks it runs after, whatever their outcome.
      if (!(s.task.after ?? []).every((n) => done(state.get(n)))) break;
      const needs = (s.task.needs ?? []).map((n) => state.get(n));
      const broken = needs.find((n) => n.state === "failed" || n.state === "not run");
      if (broken) {
        s.state = "not run";
        s.why = `needs ${broken.task.title}, which ${broken.state === "failed" ? "failed" : "did not run"}`;
        say(`== not run: ${s.task.title} (${s.why})`);
        continue;
      }
      if (needs.every((n) => n.state === "ok")) start(s);
      break;
    }
  }
  if ([...state.values()].every(done)) finish();
}

function start(s) {
  const { task } = s;
  s.state = "running";
  s.start = Date.now();
  const log = `${RESULTS}/${task.id}.log`;
  // SCHED_IDLE: below even nice 19 (a weight of 3 against its 15), so the long builds keep the CPU.
  const prefix = [
    ...(task.idleCpu ? ["chrt", "--idle", "0"] : task.nice ? ["nice", "-n", String(task.nice)] : []),
    ...(task.idleIo ? ["ionice", "-c", "3"] : []),
  ];
  // GNU time, where there is one, records the CPU seconds of the step and everything it waited for:
  // on a saturated machine the steps' CPU, not their wall time, says where a run's minutes go.
  const timed = TIME ? [TIME, "--quiet", "-f", "%U %S", "-o", cpuFile(task)] : [];
  const [cmd, ...args] = [...timed, ...prefix, ...task.cmd];
  const envShown = Object.entries(task.env ?? {})
    .filter(([k]) => k !== "JOIN_BROKER_TEST_REPORT")
    .map(([k, v]) => `${k}=${v} `)
    .join("");
  const waitedFor = [...(task.needs ?? []), ...(task.after ?? [])];
  const waited = waitedFor.length ? ` (after ${waitedFor.join(", ")}; ${secondsSince(started)} s in)` : "";
  say(`== ${task.title}${waited}: ${envShown}${[...prefix, ...task.cmd].map((a) => (a.startsWith(`${ROOT}/`) ? relative(ROOT, a) : a)).join(" ")}`);
  writeFileSync(log, "");
  // Its own process group: stopping it stops what it started (compilers, servers) too.
  const marker = `${task.id}:${process.pid}`;
  const env = { ...process.env, ...(task.env ?? {}), ...stepTmp.make(task.id).env, [STEP_MARKER]: marker };
  const child = spawn(cmd, args, { env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  s.child = child;
  const tag = `[${task.id}] `;
  for (const stream of [child.stdout, child.stderr]) {
    let pending = "";
    stream.setEncoding("utf8");
    stream.on("data", (chunk) => {
      appendFileSync(log, chunk);
      pending += chunk;
      const lines = pending.split(/\r?\n/);
      pending = lines.pop();
      for (const line of lines) say(tag + line);
    });
    stream.on("end", () => pending && say(tag + pending));
  }
  const end = (status) => {
    if (done(s)) return;
    // What it left running would take CPU from every later step: stopped, and said.
    const left = stopMarkedProcesses(marker);
    if (left.length)
      say(
        `== ${task.title} left ${left.length} process${left.length === 1 ? "" : "es"} running (${[...new Set(left.map((p) => p.name))].join(", ")}): stopped them`,
      );
    removeStepTmp(task);
    s.end = Date.now();
    s.state = status === 0 ? "ok" : "failed";
    s.why = status === 0 ? "" : `exit ${status}`;
    s.child = null;
    say(
      `== ${s.state === "ok" ? "done" : "FAILED"}: ${task.title} in ${Math.round((s.end - s.start) / 1000)} s${s.why ? ` (${s.why}; its output: ${log})` : ""}`,
    );
    pump();
  };
  child.once("error", (e) => (appendFileSync(log, `${e}\n`), end(1)));
  child.once("close", (code, signal) => end(code ?? signal));
}

/** The step's TMPDIR goes (or is kept and named, with KEEP_E2E_DIR); what a step left there is said, to be fixed where it was made. */
function removeStepTmp(task) {
  if (keepTmp) return say(`== ${task.title}: its temporary files are kept in ${join(stepTmp.root, task.id)} (KEEP_E2E_DIR)`);
  const { left, error } = stepTmp.remove(task.id);
  if (left.length) {
    const shown = left.slice(0, 5).join(", ") + (left.length > 5 ? ", …" : "");
    say(`== ${task.title} left ${left.length} entr${left.length === 1 ? "y" : "ies"} in its temporary directory (${shown}): removed them`);
  }
  if (error) say(`== ${task.title}: its temporary directory ${join(stepTmp.root, task.id)} could not all be removed: ${error}`);
}

// Never a silent minute: what runs, and what waits for what.
const heartbeat = setInterval(() => {
  if (Date.now() - lastOutput < 55_000) return;
  const running = [...state.values()].filter((s) => s.state === "running").map((s) => `${s.task.id} (${secondsSince(s.start)} s)`);
  const waitsFor = (s) => [...(s.task.needs ?? []).filter((n) => state.get(n).state !== "ok"), ...(s.task.after ?? []).filter((n) => !done(state.get(n)))];
  const waiting = [...state.values()].filter((s) => s.state === "pending" && waitsFor(s).length).map((s) => `${s.task.id} (for ${waitsFor(s).join(", ")})`);
  say(`== ${secondsSince(started)} s in: running ${running.join(", ") || "nothing"}${waiting.length ? `; waiting: ${waiting.join(", ")}` : ""}`);
}, 5_000);

let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    say(`\n== ${signal}: stopping every task`);
    for (const s of state.values()) {
      if (s.state === "pending") (s.state = "not run"), (s.why = `stopped by ${signal}`);
      if (s.child) killGroup(s.child.pid, "SIGTERM");
    }
    setTimeout(() => {
      for (const s of state.values()) if (s.child) killGroup(s.child.pid, "SIGKILL");
    }, 10_000).unref();
  });
}

function killGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    /* gone */
  }
}

say(`== npm test${quick ? " (quick)" : ""}${selected ? `: ${files.join(" ")}` : ""}: ${tasks.length} tasks in ${lanes.length} lanes`);
pump();
await finished;
clearInterval(heartbeat);
if (!keepTmp) stepTmp.close();

// ------------------------------------------------------------------------------ the summary

const reports = tasks.filter((t) => t.report).map((t) => ({ task: t, report: readReport(t.report) }));
const rows = [];
let passed = 0;
let failed = 0;
for (const s of [...state.values()].sort((a, b) => (a.start || Infinity) - (b.start || Infinity))) {
  const { task } = s;
  const r = reports.find((x) => x.task === task)?.report;
  const totals = r ? projectTotals(r) : new Map();
  const sum = [...totals.values()].reduce((a, t) => ({ passed: a.passed + t.passed, failed: a.failed + t.failed }), { passed: 0, failed: 0 });
  // A test run that failed without a failed test (it did not start, a global setup failed) still fails.
  if (task.tests && s.state === "failed" && sum.failed === 0) sum.failed = 1;
  if (task.tests) (passed += sum.passed), (failed += sum.failed);
  const result = s.state === "ok" ? "ok" : s.state === "failed" ? `FAILED (${s.why})` : `not run (${s.why})`;
  rows.push([
    task.title,
    s.start ? secondsFrom(s.start) : "",
    s.start ? secondsOf(s.end - s.start) : "",
    s.start ? cpuSeconds(task) : "",
    task.tests ? String(sum.passed) : "",
    task.tests ? String(sum.failed) : "",
    result,
  ]);
  if (totals.size > 1 || (totals.size === 1 && task.projects)) {
    for (const [project, t] of totals) {
      rows.push([
        `  ${task.projects?.[project] ?? project}`,
        Number.isFinite(t.start) ? secondsFrom(t.start) : "",
        t.end ? secondsOf(t.end - t.start) : "",
        "",
        String(t.passed),
        String(t.failed),
        `${t.files} files`,
      ]);
    }
  }
}

/** The CPU seconds (user + system) GNU time recorded for a step, or "" where there is none. */
function cpuSeconds(task) {
  try {
    const [user, system] = readFileSync(cpuFile(task), "utf8").trim().split("\n").pop().split(" ").map(Number);
    return Number.isFinite(user + system) ? String(Math.round(user + system)) : "";
  } catch {
    return "";
  }
}

function secondsFrom(t) {
  return String(Math.round((t - started) / 1000));
}
function secondsOf(ms) {
  return String(Math.round(ms / 1000));
}

const header = ["step", "start s", "seconds", "cpu s", "passed", "failed", "result"];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
const line = (r) =>
  r
    .map((c, i) => (i === 0 || i === header.length - 1 ? c.padEnd(widths[i]) : c.padStart(widths[i])))
    .join("  ")
    .trimEnd();
const table = [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
const onlyReports = reports.map((x) => x.report).filter(Boolean);
// How long each file took: the order of the next run on this machine (test/support/longest-first.ts),
// and a record to commit as test/support/test-durations.json for a machine's first run.
const durations = fileDurations(onlyReports);
writeFileSync(`${RESULTS}/test-durations.json`, `${JSON.stringify(sortKeys(durations), null, 1)}\n`);
try {
  recordDurations(durations);
} catch (e) {
  say(`== could not record the files' durations in ~/.cache/etcd-join-broker: ${e.message}`);
}
const slow = slowestTests(onlyReports, 20);
const slowFiles = slowestFiles(onlyReports, 10);
const failedTests = failures(onlyReports);

const summary = [
  `\n== steps (${Math.round((Date.now() - started) / 1000)} s in all; start is seconds after npm test began; cpu s is user + system CPU of the step and what it waited for${TIME ? "" : ", blank without GNU time"})`,
  table,
  ...(slow.length ? ["\n== the 20 slowest tests", ...slow.map((t) => `${(t.ms / 1000).toFixed(1).padStart(7)} s  ${t.project}  ${t.file} > ${t.name}`)] : []),
  ...(slowFiles.length
    ? ["\n== the 10 slowest files (hooks included)", ...slowFiles.map((f) => `${(f.ms / 1000).toFixed(1).padStart(7)} s  ${f.project}  ${f.file}`)]
    : []),
  ...(failedTests.length ? ["\n== failed tests (their output: the step's log in test-results/)", ...failedTests] : []),
  ...[...state.values()]
    .filter((s) => s.state === "failed" && !s.task.tests)
    .flatMap((s) => [
      `\n== failed: ${s.task.title} (${s.why}); the end of its output (test-results/${s.task.id}.log):`,
      ...tail(`${RESULTS}/${s.task.id}.log`, 30),
    ]),
].join("\n");
say(summary);
writeFileSync(`${RESULTS}/steps.txt`, `${summary.trimStart()}\n`);
const ok = [...state.values()].every((s) => s.state === "ok") && failed === 0;
say(`\n${passed} passed, ${failed} failed`);
process.exit(ok ? 0 : 1);

function tail(path, n) {
  try {
    return readFileSync(path, "utf8").trimEnd().split("\n").slice(-n);
  } catch {
    return [];
  }
}
