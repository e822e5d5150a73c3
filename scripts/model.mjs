// `npm run model`: model-checks the join protocol (model/join.pml) with spin.
//
// Every property is checked exhaustively in each configuration below, and every mutant of the
// model must make spin find a counterexample naming the property it breaks: a model that cannot
// fail proves nothing. docs/safety.md explains the properties and the bounds.
//
// Options: --only TEXT   run only the checks whose name contains TEXT
//          --jobs N      checks run in parallel (default: 2, at most the CPU count)
//          --trail       print the counterexample of every check that found one
//          --keep        keep the build directory (pan.c, pan, trails) and print its path
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { ensureTool } from "./tools.mjs";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const MODEL = join(ROOT, "model", "join.pml");
/** The CPU time one step of a check may use (each finishes in well under a minute of it on two cores). */
const RUN_CPU_SECONDS = 600;

// Exhaustive search: safety runs store compressed states (COLLAPSE) in a bounded amount of memory;
// a search that hits a bound is reported as incomplete, which fails the check.
const SAFETY = { cflags: ["-DSAFETY", "-DCOLLAPSE", "-DMEMLIM=6144"], pan: ["-m9000000", "-w25"] };
// With a fault budget (rollback runs) a run that used it up may halt with an agent waiting for
// a crash or lease end that no longer comes: not a deadlock of the protocol, so pan's invalid
// end state report is off (-E); the assertions are checked as in every safety run.
const SAFETY_BUDGETED = { cflags: SAFETY.cflags, pan: [...SAFETY.pan, "-E"] };
const PROGRESS = { cflags: ["-DCOLLAPSE", "-DNFAIR=3", "-DMEMLIM=4096"], pan: ["-a", "-f", "-m2000000", "-w24"] };
// Looking for a counterexample: breadth first, so that the one found is a shortest one.
const COUNTEREXAMPLE = { cflags: ["-DSAFETY", "-DBFS", "-DCOLLAPSE", "-DMEMLIM=4096"], pan: ["-w24"] };

/** What must hold: `null` for no error at all, otherwise the violation spin must report. */
const CHECKS = [
  // The longest first, so that two jobs finish together.
  {
    name: "safety, maxInFlight 2, etcd learner limit 2 (etcd 3.6 --max-learners=2)",
    mode: SAFETY,
    defines: ["MAX_IN_FLIGHT=2", "MAX_LEARNERS=2"],
    expect: null,
  },
  { name: "safety, maxInFlight 1, etcd learner limit 1 (etcd 3.4/3.5)", mode: SAFETY, defines: [], expect: null },
  { name: "progress, maxInFlight 1, up to 4 faults", mode: PROGRESS, defines: ["LIVENESS", "FAULTS=4"], expect: null },
  {
    name: "progress, maxInFlight 2, etcd learner limit 2, up to 3 faults",
    mode: PROGRESS,
    defines: ["LIVENESS", "FAULTS=3", "MAX_IN_FLIGHT=2", "MAX_LEARNERS=2"],
    expect: null,
  },
  // The pipelined order is reachable: a learner promoted while maxInFlight learners are pending.
  // Without this witness the maxInFlight 2 runs above could hold for want of ever pipelining.
  {
    name: "witness: promotion while 2 learners are pending (pipelined, maxInFlight 2, etcd learner limit 2)",
    mode: COUNTEREXAMPLE,
    defines: ["MAX_IN_FLIGHT=2", "MAX_LEARNERS=2", "WITNESS_PIPELINE"],
    expect: "no_pipelined_promotion",
  },
  // A limit of the design, kept as a check: the broker bounds admissions, etcd bounds learners.
  { name: "limit: more etcd learners allowed than maxInFlight", mode: COUNTEREXAMPLE, defines: ["MAX_LEARNERS=2"], expect: "learners_bounded" },
  // The broker's state rolled back to a backup from before the bootstrap (a restored backup, a
  // point-in-time restore): without the agent's check a node is told to bootstrap a cluster that
  // exists, and does; with it, one cluster.
  {
    name: "rollback: broker state restored from a backup, without the agent's check",
    mode: COUNTEREXAMPLE,
    defines: ["ROLLBACK", "FAULTS=3"],
    expect: "one_cluster",
  },
  {
    name: "rollback: broker state restored from a backup, the agent asks the controllers it knows first, up to 4 faults",
    mode: SAFETY_BUDGETED,
    defines: ["ROLLBACK", "NODE_CHECK", "FAULTS=4"],
    expect: null,
  },
  // Gate mode (installers that add their own member, as kubeadm does) under the start rule: every
  // --initial-cluster an installer writes is complete, and admissions still overlap.
  {
    name: "gate: start rule, maxInFlight 2, etcd learner limit 2",
    mode: SAFETY,
    defines: ["GATE", "MAX_IN_FLIGHT=2", "MAX_LEARNERS=2"],
    expect: null,
    small: true,
  },
  {
    name: "gate: start rule, 4 nodes, maxInFlight 3, etcd learner limit 3",
    mode: SAFETY,
    defines: ["GATE", "N=4", "MAX_IN_FLIGHT=3", "MAX_LEARNERS=3"],
    expect: null,
    small: true,
  },
  {
    name: "witness: gate mode admits a node while another is not yet a voter (start rule, maxInFlight 2)",
    mode: COUNTEREXAMPLE,
    defines: ["GATE", "MAX_IN_FLIGHT=2", "MAX_LEARNERS=2", "WITNESS_GATE_OVERLAP"],
    expect: "no_overlapping_admission",
  },
  // Mutants: each breaks one rule of the protocol, and spin must catch it.
  {
    name: "mutant: gate mode admits the next installer before the previous member started (kubeadm#2005)",
    mode: COUNTEREXAMPLE,
    defines: ["GATE", "MAX_IN_FLIGHT=2", "MAX_LEARNERS=2", "MUTANT_ADMIT_BEFORE_START"],
    expect: "initial_cluster_complete",
  },
  {
    name: "mutant: bootstrap handed to another node when its lease expires",
    mode: COUNTEREXAMPLE,
    defines: ["MUTANT_BOOTSTRAP_ON_EXPIRY"],
    expect: "one_cluster",
  },
  {
    name: "mutant: joiners admitted before the cluster is bootstrapped",
    mode: COUNTEREXAMPLE,
    defines: ["MUTANT_JOIN_BEFORE_BOOTSTRAP"],
    expect: "one_cluster",
  },
  { name: "mutant: agent trusts its marker instead of the broker", mode: COUNTEREXAMPLE, defines: ["MUTANT_AGENT_TRUSTS_MARKER"], expect: "one_cluster" },
  { name: "mutant: admission without a free slot", mode: COUNTEREXAMPLE, defines: ["MUTANT_ADMIT_WITHOUT_SLOT"], expect: "admissions_bounded" },
  {
    name: "mutant: revocation frees the slot but is not published",
    mode: COUNTEREXAMPLE,
    defines: ["MUTANT_REVOCATION_UNPUBLISHED"],
    expect: "no_add_after_revocation",
  },
  {
    name: "mutant: join API does not re-check revocations before the add",
    mode: COUNTEREXAMPLE,
    defines: ["MUTANT_NO_RECHECK"],
    expect: "no_add_after_revocation",
  },
  { name: "mutant: join API adds voters instead of learners", mode: COUNTEREXAMPLE, defines: ["MUTANT_ADD_AS_VOTER"], expect: "quorum_kept" },
  { name: "mutant: join API promotes learners that are not running", mode: COUNTEREXAMPLE, defines: ["MUTANT_PROMOTE_UNSTARTED"], expect: "quorum_kept" },
  {
    name: "mutant: join API promotes learners that are not running, pipelined (maxInFlight 2, etcd learner limit 2)",
    mode: COUNTEREXAMPLE,
    defines: ["MAX_IN_FLIGHT=2", "MAX_LEARNERS=2", "MUTANT_PROMOTE_UNSTARTED"],
    expect: "quorum_kept",
  },
  {
    name: "mutant: reaper spares started learners of ended admissions",
    mode: PROGRESS,
    defines: ["LIVENESS", "FAULTS=4", "MUTANT_REAP_UNSTARTED_ONLY"],
    expect: "acceptance cycle",
  },
];

function findCompiler() {
  for (const cc of [process.env.CC, "gcc", "cc", "clang"].filter(Boolean)) {
    if (spawnSync(cc, ["--version"], { stdio: "ignore" }).status === 0) return cc;
  }
  if (process.getuid?.() === 0) {
    console.error("[model] no C compiler: installing Debian package gcc…");
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    spawnSync("apt-get", ["update", "-qq"], { stdio: "inherit", env });
    spawnSync("apt-get", ["install", "-y", "-qq", "gcc", "libc6-dev"], { stdio: "inherit", env });
    if (spawnSync("gcc", ["--version"], { stdio: "ignore" }).status === 0) return "gcc";
  }
  throw new Error("spin's verifier is C: install a C compiler ('sudo apt-get install -y gcc') or set CC");
}

/**
 * Runs one step of a check, bounded by CPU time (RLIMIT_CPU, `ulimit -t`), not by the clock: on
 * a busy machine, at the lowest priority beside the tests, a search may take far longer than its
 * CPU time, and must not fail for it. Past the bound the kernel ends it (SIGXCPU).
 */
function run(cmd, args, cwd) {
  return new Promise((resolvePromise) => {
    const child = spawn("sh", ["-c", `ulimit -t ${RUN_CPU_SECONDS} && exec "$@"`, "sh", cmd, ...args], { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.on("close", (code, signal) => resolvePromise({ code, signal, out }));
  });
}

/** The facts of a pan report that decide a check. */
export function readPanReport(out) {
  const violation =
    out.match(/assertion violated (\w+)/)?.[1] ??
    (/acceptance cycle/.test(out) ? "acceptance cycle" : /invalid end state/.test(out) ? "invalid end state" : null);
  const errors = Number(out.match(/errors: (\d+)/)?.[1] ?? NaN);
  const incomplete = /Search not completed|max search depth too small|reached -DMEMLIM bound|out of memory/i.test(out);
  const states = Number(out.match(/([\d.e+]+) states, stored/)?.[1] ?? NaN);
  return { violation, errors, incomplete, states };
}

/**
 * The C compiler's optimization for a check's verifier. A search that ends within a few thousand
 * states (every counterexample search: breadth first, it stops at the first one; the `small`
 * checks) runs in well under a second either way, while -O2 compiles pan.c in about 3 s of CPU
 * against 0.5 s for -O0. The large exhaustive runs keep -O2: it saves more in the search than the
 * compile costs (a 6-million-state run: 29 s against 32 s at -O1).
 */
function optimization(c) {
  return c.expect !== null || c.small ? "-O0" : "-O2";
}

async function check(c, dir, { spin, cc, trail }) {
  mkdirSync(dir, { recursive: true });
  copyFileSync(MODEL, join(dir, "join.pml"));
  const defines = c.defines.map((d) => `-D${d}`);
  const started = Date.now();
  const gen = await run(spin, [...defines, "-a", "join.pml"], dir);
  if (gen.code !== 0) return { ok: false, detail: `spin -a failed:\n${gen.out}` };
  const build = await run(cc, [optimization(c), "-w", ...c.mode.cflags, "-o", "pan", "pan.c"], dir);
  if (build.code !== 0) return { ok: false, detail: `compiling pan failed:\n${build.out}` };
  const pan = await run("./pan", c.mode.pan, dir);
  writeFileSync(join(dir, "pan.out"), pan.out);
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (pan.signal)
    return { ok: false, detail: pan.signal === "SIGXCPU" ? `pan used its ${RUN_CPU_SECONDS} s of CPU time` : `pan was killed (${pan.signal})`, seconds };
  const r = readPanReport(pan.out);
  let ok;
  let verdict;
  if (c.expect === null) {
    ok = r.errors === 0 && !r.incomplete;
    verdict = ok ? `holds (${r.states.toLocaleString("en")} states)` : r.errors > 0 ? `VIOLATED: ${r.violation ?? "error"}` : "INCOMPLETE search";
  } else {
    ok = r.errors > 0 && r.violation === c.expect;
    verdict = ok
      ? `counterexample found: ${r.violation}`
      : r.errors > 0
        ? `WRONG counterexample: ${r.violation} (expected ${c.expect})`
        : `NO counterexample (expected ${c.expect})`;
  }
  let trailText;
  if (r.errors > 0 && (trail || !ok)) {
    const t = await run(spin, [...defines, "-t", "-p", "-g", "join.pml"], dir);
    writeFileSync(join(dir, "trail.txt"), t.out);
    trailText = condenseTrail(t.out, r.violation);
  }
  return { ok, verdict, seconds, detail: ok ? undefined : pan.out.split("\n").slice(-40).join("\n"), trail: trailText };
}

/** A counterexample as the model's narration (its "@ " lines), the start of a cycle, and the violation. */
function condenseTrail(out, violation) {
  const lines = out
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.startsWith("@ ") || /START OF CYCLE|assertion violated/.test(l))
    .map((l) => (l.startsWith("@ ") ? l.slice(2) : /assertion violated/.test(l) ? `VIOLATED: ${violation}` : l));
  return lines.length > 120 ? [`… ${lines.length - 120} earlier events …`, ...lines.slice(-120)].join("\n") : lines.join("\n");
}

async function main() {
  const { values } = parseArgs({
    options: { only: { type: "string" }, jobs: { type: "string" }, trail: { type: "boolean" }, keep: { type: "boolean" } },
  });
  const spin = ensureTool("spin");
  const cc = findCompiler();
  const checks = CHECKS.filter((c) => !values.only || c.name.includes(values.only));
  if (checks.length === 0) throw new Error(`no check matches --only ${values.only}`);
  const jobs = Math.max(1, Math.min(Number(values.jobs ?? 2), availableParallelism(), checks.length));
  const root = mkdtempSync(join(tmpdir(), "join-broker-model-"));
  console.log(`[model] ${checks.length} checks of model/join.pml with ${spin}, ${jobs} at a time (build dir ${root})`);

  const started = Date.now();
  const results = new Array(checks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: jobs }, async () => {
      while (next < checks.length) {
        const i = next++;
        const c = checks[i];
        const r = await check(c, join(root, String(i).padStart(2, "0")), { spin, cc, trail: values.trail });
        results[i] = r;
        console.log(`${r.ok ? "ok  " : "FAIL"} ${c.name}: ${r.verdict ?? "error"} [${r.seconds ?? "?"} s]`);
        if (r.trail) console.log(`--- counterexample (${c.name}):\n${r.trail}\n---`);
        if (!r.ok && r.detail) console.log(r.detail);
      }
    }),
  );
  const failed = results.filter((r) => !r.ok).length;
  console.log(`[model] ${checks.length - failed}/${checks.length} checks as expected in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  if (failed > 0 || values.keep) console.log(`[model] build dir kept: ${root}`);
  else rmSync(root, { recursive: true, force: true });
  process.exit(failed > 0 ? 1 : 0);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(`[model] ${e.message}`);
    process.exit(1);
  });
}
