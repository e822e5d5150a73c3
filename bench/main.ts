/**
 * `npm run bench`: every benchmark against its ceiling or baseline in the same run, each figure
 * the median of several runs, written to bench/results.json and BENCHMARKS.md. `--quick` uses
 * fewer and smaller runs (under two minutes); `--only a,b` runs some of them and writes to
 * bench/out/ instead, or with `--merge` into bench/results.json in place of those sections;
 * `--etcd 3.6,3.7` limits the join to those etcd versions; `--plain-http` runs the join's etcd
 * without TLS (the default is TLS with client certificates); `--render` only rewrites BENCHMARKS.md
 * from bench/results.json. `--only kubeadm` runs the real kubeadm through the gate (root and the
 * Kubernetes builds; not in the default set: about three minutes a round of four arms); `--only
 * k0s` runs real k0s 1.28 and 1.36 through the gate against a serial script (root and the k0s
 * builds; not in the default set either: about ten minutes a round).
 * Benchmarks assert nothing about time: the exit code is 0 unless a benchmark could not run or
 * a correctness check inside one (FIFO, exactly once, one cluster) failed.
 * @module
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, release, totalmem } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { brokerThroughput } from "./broker-throughput.ts";
import { clusterJoin, joinChecksPassed, killJoinProcesses, type JoinSettings } from "./cluster-join.ts";
import { etcdCatchUp, type CatchUpSettings } from "./etcd-catchup.ts";
import { executableStartup } from "./executable.ts";
import { footprint } from "./footprint.ts";
import { handoff } from "./handoff.ts";
import { destroyKubeadmLabs, KUBEADM_ARMS, kubeadmGate, type KubeadmArm, type KubeadmGateSettings } from "./kubeadm-gate.ts";
import { destroyK0sLabs, K0S_ARMS, k0sGate, type K0sArm, type K0sBenchSettings } from "./k0s-gate.ts";
import { queueScale } from "./queue-scale.ts";
import { TARGETS, renderReport } from "./report.ts";
import type { Results } from "./results.ts";
import { startBroker, type BrokerProcess, type BrokerRuntime } from "../test/support/stack.ts";
import { ROOT, scratchDir } from "./support/paths.ts";
import { log } from "./support/stats.ts";
import { verifier } from "./verifier.ts";
import { freshBuild } from "../bin/built-cli.mjs";
import { buildCli } from "../scripts/build-cli.mjs";

const SECTIONS = ["broker", "handoff", "serve", "scale", "verifier", "join", "catchup", "executable", "footprint", "kubeadm", "k0s"] as const;
type Section = (typeof SECTIONS)[number];
/** Run only when asked for by name (`--only`): root, the Kubernetes builds, minutes a round. A run of the default set keeps their earlier figures. */
const OPT_IN: readonly Section[] = ["kubeadm", "k0s"];
const DEFAULT_SECTIONS = SECTIONS.filter((s) => !OPT_IN.includes(s));

export const SETTINGS = {
  quick: {
    broker: { runs: 3, requests: 250, concurrency: 32 },
    handoff: { runs: 3, nodes: 200 },
    scale: { tickets: 1_000, concurrency: 32 },
    verifier: { runs: 3, seconds: 1 },
    executable: { runs: 3 },
    footprint: { runs: 1, clusters: 20 },
    join: { versions: ["3.6"], sizes: [2], runs: 1, pipelined: { versions: ["3.6"], sizes: [6], maxInFlight: 6 } } as JoinSettings,
    catchup: { versions: ["3.6"], writes: [10, 150], trials: 2 } as CatchUpSettings,
    kubeadm: { rounds: 1, maxInFlight: 4 } as KubeadmGateSettings,
    k0s: { rounds: 1 } as K0sBenchSettings,
  },
  full: {
    broker: { runs: 5, requests: 1_500, concurrency: 32 },
    handoff: { runs: 5, nodes: 200 },
    scale: { tickets: 10_000, concurrency: 32 },
    verifier: { runs: 5, seconds: 2 },
    executable: { runs: 7 },
    footprint: { runs: 3, clusters: 100 },
    join: {
      versions: ["3.4", "3.5", "3.6", "3.7"],
      sizes: [2, 4, 6],
      runs: 3,
      runsBySize: { 2: 9 },
      pipelined: { versions: ["3.6", "3.7"], sizes: [6], maxInFlight: 6 },
    } as JoinSettings,
    catchup: { versions: ["3.4", "3.5", "3.6", "3.7"], writes: [10, 150], trials: 6 } as CatchUpSettings,
    kubeadm: { rounds: 3, maxInFlight: 4 } as KubeadmGateSettings,
    k0s: { rounds: 3 } as K0sBenchSettings,
  },
};

function version(fn: () => string): string {
  try {
    return fn().trim();
  } catch {
    return "unknown";
  }
}

function machine(etcd: string) {
  const list = cpus();
  const pkg = (path: string) => (JSON.parse(readFileSync(resolve(ROOT, path), "utf8")) as { version: string }).version;
  return {
    cpus: list.length,
    cpuModel: list[0]?.model ?? "unknown",
    memoryBytes: totalmem(),
    os: `${process.platform} ${release()}`,
    node: process.version,
    wrangler: version(() => pkg("node_modules/wrangler/package.json")),
    workerd: version(() => pkg("node_modules/wrangler/node_modules/@cloudflare/workerd-linux-64/package.json")),
    jose: version(() => pkg("node_modules/jose/package.json")),
    etcd,
    commit: version(() => execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" })),
  };
}

export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: "boolean" },
      only: { type: "string" },
      etcd: { type: "string" },
      sizes: { type: "string" },
      runs: { type: "string" },
      "plain-http": { type: "boolean" },
      merge: { type: "boolean" },
      render: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(
      `Usage: npm run bench [-- --quick] [-- --only ${SECTIONS.join(",")} [--merge]] [-- --etcd 3.4,3.5,3.6,3.7] [-- --plain-http] [-- --render]\n` +
        "  --merge   with --only: write those sections into bench/results.json (and BENCHMARKS.md), keeping the others\n" +
        `  --only kubeadm  the real kubeadm through the gate (as root, with the Kubernetes builds; not in the default set: ${DEFAULT_SECTIONS.join(",")})\n` +
        "  --etcd    the etcd versions the whole-cluster join runs on (default: all; --quick: 3.6)\n" +
        "  --sizes   the joining nodes of the whole-cluster join, e.g. 2,6 (default: 2,4,6; --quick: 2)\n" +
        "  --runs    runs per size of the whole-cluster join (default: 9 for 1 + 2, else 3; --quick: 1)\n" +
        "  --plain-http  the whole-cluster join on plain-http etcd (default: TLS and client certificates on every etcd port)\n" +
        "  BENCH_JOIN_TRACE=DIR  writes each brokered join's agent events and join API lines, in ms from its start, to DIR\n" +
        "  BENCH_KEEP=1          keeps each brokered join's node directories (etcd logs and flags) in bench/out\n" +
        `  BENCH_KUBEADM_ARMS=a,b  only these arms of --only kubeadm (${KUBEADM_ARMS.join(", ")}); what each printed stays in bench/out/kubeadm\n` +
        "  --only k0s      real k0s 1.28 and 1.36 through the gate against a serial script (as root, with the k0s builds; hold the lab lock: flock /tmp/jb-lab.lock)\n" +
        `  BENCH_K0S_ARMS=a,b      only these arms of --only k0s (${K0S_ARMS.join(", ")}); BENCH_K0S_VERSIONS=1.28 only that k0s; what k0s printed stays in bench/out/k0s\n` +
        "  --render  only rewrite BENCHMARKS.md from bench/results.json\n",
    );
    return 0;
  }
  if (values.render) {
    const results = JSON.parse(readFileSync(join(ROOT, "bench/results.json"), "utf8")) as Results;
    writeFileSync(join(ROOT, "BENCHMARKS.md"), renderReport(results));
    log("rewrote BENCHMARKS.md from bench/results.json");
    return 0;
  }
  const mode = values.quick ? "quick" : "full";
  const only = values.only ? (values.only.split(",").map((s) => s.trim()) as Section[]) : [...DEFAULT_SECTIONS];
  const unknown = only.filter((s) => !SECTIONS.includes(s));
  if (unknown.length) {
    process.stderr.write(`unknown benchmark(s): ${unknown.join(", ")}; choose from ${SECTIONS.join(", ")}\n`);
    return 2;
  }
  const settings = structuredClone(SETTINGS[mode]);
  if (values.etcd) {
    const wanted = values.etcd.split(",").map((x) => x.trim());
    const known = SETTINGS.full.join.versions;
    const bad = wanted.filter((v) => !known.includes(v));
    if (bad.length) {
      process.stderr.write(`unknown etcd version(s): ${bad.join(", ")}; choose from ${known.join(", ")}\n`);
      return 2;
    }
    settings.join.versions = known.filter((v) => wanted.includes(v));
    settings.join.pipelined.versions = SETTINGS.full.join.pipelined.versions.filter((v) => wanted.includes(v));
    settings.catchup.versions = known.filter((v) => wanted.includes(v));
  }
  if (values.sizes) {
    const sizes = values.sizes.split(",").map((x) => Number(x.trim()));
    if (sizes.some((n) => !Number.isInteger(n) || n < 1 || n > 16)) {
      process.stderr.write(`--sizes takes joining-node counts from 1 to 16, e.g. 2,4,6; got ${values.sizes}\n`);
      return 2;
    }
    settings.join.sizes = sizes;
    settings.join.pipelined.sizes = settings.join.pipelined.sizes.filter((n) => sizes.includes(n));
  }
  if (values["plain-http"]) settings.join.tls = false;
  if (process.env.BENCH_KUBEADM_ARMS) {
    const arms = process.env.BENCH_KUBEADM_ARMS.split(",").map((x) => x.trim()) as KubeadmArm[];
    const bad = arms.filter((a) => !KUBEADM_ARMS.includes(a));
    if (bad.length) {
      process.stderr.write(`unknown kubeadm arm(s): ${bad.join(", ")}; choose from ${KUBEADM_ARMS.join(", ")}\n`);
      return 2;
    }
    settings.kubeadm.arms = arms;
  }
  if (process.env.BENCH_K0S_ARMS) {
    const arms = process.env.BENCH_K0S_ARMS.split(",").map((x) => x.trim()) as K0sArm[];
    const bad = arms.filter((a) => !K0S_ARMS.includes(a));
    if (bad.length) {
      process.stderr.write(`unknown k0s arm(s): ${bad.join(", ")}; choose from ${K0S_ARMS.join(", ")}\n`);
      return 2;
    }
    settings.k0s.arms = arms;
  }
  if (process.env.BENCH_K0S_VERSIONS) {
    const versions = process.env.BENCH_K0S_VERSIONS.split(",").map((x) => x.trim());
    const bad = versions.filter((v) => v !== "1.28" && v !== "1.36");
    if (bad.length) {
      process.stderr.write(`unknown k0s version(s): ${bad.join(", ")}; choose from 1.28, 1.36\n`);
      return 2;
    }
    settings.k0s.versions = versions as ("1.28" | "1.36")[];
  }
  if (values.runs) {
    const runs = Number(values.runs);
    if (!Number.isInteger(runs) || runs < 1 || runs > 20) {
      process.stderr.write(`--runs takes a number from 1 to 20; got ${values.runs}\n`);
      return 2;
    }
    settings.join.runs = runs;
    delete settings.join.runsBySize;
  }
  const etcdScripts = (await import(pathToFileURL(resolve(ROOT, "scripts/etcd.mjs")).href)) as typeof import("../scripts/etcd.mjs");
  const etcdPath = async (v: string) => {
    const bin = await etcdScripts.ensureEtcd(v, { log });
    return { bin, release: etcdScripts.binaryRelease(bin) ?? "unknown" };
  };
  // Built or installed before the clock starts (once per machine; scripts/etcd.mjs).
  const etcdReleases: string[] = [];
  if (only.includes("join")) for (const v of settings.join.versions) etcdReleases.push(`${(await etcdPath(v)).release}`);
  if (only.includes("catchup"))
    for (const v of settings.catchup.versions)
      if (!settings.join.versions.includes(v) || !only.includes("join")) etcdReleases.push(`${(await etcdPath(v)).release}`);
  // The agents and the join API run the package's command as installed: the built CLI, fresh.
  if (only.includes("join") || only.includes("executable") || only.includes("footprint") || only.includes("kubeadm") || only.includes("k0s")) {
    await buildCli();
    const built = freshBuild(ROOT);
    if (!built.entry) throw new Error(`the CLI build is not used: ${built.why}`);
    log(`join: bin/join-broker runs the built CLI (${built.why})`);
  }
  process.env.CLOUDFLARE_CF_FETCH_ENABLED = "false";
  process.env.WRANGLER_SEND_METRICS = "false";

  // The bench Worker (bench/worker) as the tests start the broker, its state in bench/out.
  const brokers = new Set<BrokerProcess>();
  const start = async (label: string, runtime: BrokerRuntime = "wrangler") => {
    const persistDir = mkdtempSync(join(scratchDir(), `state-${label}-`));
    try {
      const b = await startBroker({ runtime, worker: "bench", persistDir });
      brokers.add(b);
      return b;
    } catch (e) {
      rmSync(persistDir, { recursive: true, force: true });
      throw e;
    }
  };
  const stop = async (b: BrokerProcess) => {
    brokers.delete(b);
    await b.stop();
    rmSync(b.persistDir, { recursive: true, force: true });
  };
  const onSignal = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping`);
    void Promise.all([...brokers].map((b) => b.stop()).concat(killJoinProcesses(), destroyKubeadmLabs(), destroyK0sLabs())).finally(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);

  const began = Date.now();
  const results: Results = {
    date: new Date().toISOString(),
    mode,
    sections: only,
    settings,
    machine: machine(etcdReleases.join(", ") || "not used"),
    loadAverage: { start: loadavg().map((x) => Math.round(x * 100) / 100), end: [] },
    durationSeconds: 0,
    errors: {},
    skipped: {},
  };
  const attempt = async (section: Section, fn: () => Promise<void>) => {
    if (!only.includes(section)) return;
    log(`== ${section}`);
    try {
      await fn();
    } catch (e) {
      results.errors[section] = e instanceof Error ? e.message : String(e);
      log(`${section} failed: ${results.errors[section]}`);
    }
  };

  try {
    // One broker process for everything but the scale run, which gets its own so that its memory figures are its own.
    const needsShared = only.some(
      (s) => s !== "scale" && s !== "serve" && s !== "catchup" && s !== "executable" && s !== "footprint" && s !== "kubeadm" && s !== "k0s",
    );
    const shared = needsShared ? await start("shared") : null;
    await attempt("broker", async () => {
      results.broker = await brokerThroughput(shared!, settings.broker);
    });
    await attempt("handoff", async () => {
      results.handoff = await handoff(shared!, settings.handoff);
    });
    // Throughput and hand-off again, on join-broker serve's runtime (workerd from npm, the serve
    // configuration, no wrangler in front), with its own no-op ceiling.
    await attempt("serve", async () => {
      const own = await start("serve", "serve");
      try {
        results.serve = { broker: await brokerThroughput(own, settings.broker), handoff: await handoff(own, settings.handoff) };
        // wrangler dev's figures of this same run travel with them, for the side-by-side table.
        if (results.broker && results.handoff)
          results.serve.besideWrangler = { date: results.date, broker: results.broker.summary, handoff: results.handoff.summary };
      } finally {
        await stop(own);
      }
    });
    await attempt("verifier", async () => {
      results.verifier = await verifier(shared!, settings.verifier);
    });
    await attempt("scale", async () => {
      const own = await start("scale");
      try {
        results.scale = await queueScale(own, settings.scale);
      } finally {
        await stop(own);
      }
    });
    await attempt("join", async () => {
      results.join = await clusterJoin(shared!, settings.join, etcdPath);
    });
    // etcd alone: a new member's catch-up on a short raft log and on one past 100 entries.
    await attempt("catchup", async () => {
      results.catchup = await etcdCatchUp(settings.catchup, etcdPath);
    });
    // The single executable file beside the npm form: no broker (the agents' stand-in is local).
    await attempt("executable", async () => {
      results.executable = await executableStartup(settings.executable);
    });
    // The programs' memory, as started by an operator: no shared broker (serve is its own).
    await attempt("footprint", async () => {
      results.footprint = await footprint(settings.footprint);
    });
    // The real kubeadm on lab hosts, with a broker of its own per gated arm (join-broker serve in the lab).
    await attempt("kubeadm", async () => {
      const got = await kubeadmGate(settings.kubeadm);
      if ("skipped" in got) {
        results.skipped!.kubeadm = got.skipped;
        log(`kubeadm skipped: ${got.skipped}`);
      } else results.kubeadm = got;
    });
    // Real k0s on lab hosts, the serial script beside the gate (join-broker serve in the lab).
    await attempt("k0s", async () => {
      const got = await k0sGate(settings.k0s);
      if ("skipped" in got) {
        results.skipped!.k0s = got.skipped;
        log(`k0s skipped: ${got.skipped}`);
      } else results.k0s = got;
    });
    if (shared) await stop(shared);
  } finally {
    await Promise.all([...brokers].map((b) => stop(b)));
  }

  results.loadAverage.end = loadavg().map((x) => Math.round(x * 100) / 100);
  results.durationSeconds = Math.round((Date.now() - began) / 1000);
  // A run of every default section is a full run (written over bench/results.json, keeping the opt-in sections' figures).
  const fullRun = DEFAULT_SECTIONS.every((s) => only.includes(s));
  const partial = !fullRun && !values.merge;
  const dir = partial ? scratchDir() : join(ROOT, "bench");
  const jsonPath = join(dir, partial ? "results-partial.json" : "results.json");
  const mdPath = partial ? join(dir, "BENCHMARKS-partial.md") : join(ROOT, "BENCHMARKS.md");
  const previous = () => JSON.parse(readFileSync(jsonPath, "utf8")) as Results;
  const written = values.merge && !fullRun ? mergeInto(previous(), results) : fullRun ? keepOptIn(previous, results) : results;
  writeFileSync(jsonPath, `${JSON.stringify(written, null, 2)}\n`);
  writeFileSync(mdPath, renderReport(written));
  log(`wrote ${jsonPath} and ${mdPath} (${results.durationSeconds} s)`);

  const broken =
    Object.keys(results.errors).length > 0 ||
    results.kubeadm?.runs.some((r) => !r.ok) ||
    results.k0s?.runs.some((r) => !r.ok) ||
    (results.scale && (!results.scale.check.passed || results.scale.retention.ratio > TARGETS.retentionRatio)) ||
    results.join?.runs.some((r) => !joinChecksPassed(r));
  return broken ? 1 : 0;
}

/**
 * The sections of a partial run written over the same sections of an earlier full run; the
 * others stay as they were. The partial run's own date, mode, settings, machine and load are kept
 * beside it (`merged`), so the report says which figures come from which run.
 */
function mergeInto(previous: Results, partial: Results): Results {
  const out: Results = { ...previous, errors: { ...previous.errors } };
  // A section this run skipped (it cannot run here) keeps its earlier figures.
  for (const section of (partial.sections as Section[]).filter((s) => !partial.skipped?.[s])) {
    delete out.errors[section];
    if (partial.errors[section]) out.errors[section] = partial.errors[section];
    (out as unknown as Record<string, unknown>)[section] = (partial as unknown as Record<string, unknown>)[section];
  }
  // The join per etcd version: versions this run did not measure keep their earlier figures.
  if (partial.join && previous.join?.versions) {
    const fresh = new Set(partial.join.versions?.map((v) => v.minor));
    const kept = <T extends { etcd?: string }>(xs: T[]) => xs.filter((x) => x.etcd !== undefined && !fresh.has(x.etcd));
    const order = (v?: string) => Number((v ?? "0").replace(".", ""));
    out.join = {
      versions: [...previous.join.versions.filter((v) => !fresh.has(v.minor)), ...(partial.join.versions ?? [])].sort(
        (a, b) => order(a.minor) - order(b.minor),
      ),
      sizes: [...new Set([...previous.join.sizes, ...partial.join.sizes])].sort((a, b) => a - b),
      runsPerSize: partial.join.runsPerSize,
      runs: [...kept(previous.join.runs), ...partial.join.runs].sort((a, b) => order(a.etcd) - order(b.etcd)),
      summary: [...kept(previous.join.summary), ...partial.join.summary].sort((a, b) => order(a.etcd) - order(b.etcd)),
    };
    // Rows replaced by rows on the other transport (plain http, TLS) stay beside them, to show what TLS costs.
    const tlsOf = (x: { tls?: boolean }) => x.tls === true;
    const replaced = previous.join.summary.filter((x) =>
      partial.join!.summary.some((y) => y.etcd === x.etcd && y.maxInFlight === x.maxInFlight && y.n === x.n && tlsOf(y) !== tlsOf(x)),
    );
    const joinRun = [...(previous.merged ?? [])].reverse().find((m) => m.sections.includes("join")) ?? previous;
    if (replaced.length) out.join.otherTransport = { date: joinRun.date, loadAverage: joinRun.loadAverage, summary: replaced };
    else if (previous.join.otherTransport) out.join.otherTransport = previous.join.otherTransport;
  }
  // An earlier merged run stays on record while some of its figures do: a join run until every
  // etcd version it measured was measured again.
  const remeasuredVersions = new Set(partial.join?.versions?.map((v) => v.minor) ?? []);
  const superseded = (m: NonNullable<Results["merged"]>[number]) =>
    m.sections.every((s) => partial.sections.includes(s)) &&
    (!m.sections.includes("join") || ((m.settings as { join?: { versions?: string[] } }).join?.versions ?? []).every((v) => remeasuredVersions.has(v)));
  const runs = (previous.merged ?? []).filter((m) => !superseded(m));
  out.merged = [
    ...runs,
    {
      date: partial.date,
      mode: partial.mode,
      sections: partial.sections.filter((s) => !partial.skipped?.[s]),
      settings: partial.settings,
      machine: partial.machine,
      loadAverage: partial.loadAverage,
      durationSeconds: partial.durationSeconds,
    },
  ];
  return out;
}

/**
 * A full run of the default sections keeps the opt-in sections' figures of bench/results.json
 * (and the record of the runs that measured them) that it did not measure itself.
 */
function keepOptIn(previous: () => Results, fresh: Results): Results {
  const kept = OPT_IN.filter((s) => !fresh.sections.includes(s) || fresh.skipped?.[s]);
  let before: Results;
  try {
    before = previous();
  } catch {
    return fresh;
  }
  const out = { ...fresh } as unknown as Record<string, unknown>;
  const carried = kept.filter((s) => (before as unknown as Record<string, unknown>)[s] !== undefined);
  for (const s of carried) out[s] = (before as unknown as Record<string, unknown>)[s];
  const record = (m: NonNullable<Results["merged"]>[number]) => ({
    date: m.date,
    mode: m.mode,
    sections: m.sections.filter((s) => carried.includes(s as Section)),
    settings: m.settings,
    machine: m.machine,
    loadAverage: m.loadAverage,
    durationSeconds: m.durationSeconds,
  });
  // Measured by the earlier run itself, or by a partial run merged into it.
  const runs = [before, ...(before.merged ?? [])].map(record).filter((m) => m.sections.length > 0);
  if (runs.length) out.merged = [...(fresh.merged ?? []), ...runs];
  return out as unknown as Results;
}
