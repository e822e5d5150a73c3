/**
 * (8) kubeadm through the gate: the unmodified kubeadm on five lab hosts (1 + 4, test/lab/), four
 * arms per round, each on a fresh lab, one after another (A, B, C, D), timed from the first command
 * to five started etcd voters with every kubeadm (and agent) exited 0:
 *
 * - **serial**: `kubeadm init` on host 0, then `kubeadm join --control-plane` on hosts 1–4 one
 *   after another, by hand; the recipe's commands and files, no broker.
 * - **serialized**: `join-broker serve` on a host of its own, maxInFlight 1, the five agents
 *   (`join-broker join --exec` with docs/installers.md's kubeadm recipe) started at once.
 * - **start-rule**: the same with maxInFlight 4 and etcd's `--max-learners 4` (init.yaml's
 *   `etcd.local.extraArgs`): the broker admits the next node once every admitted node's member
 *   started, so joins overlap while every `--initial-cluster` names every member.
 * - **prepared** (D): the start rule too, with the joins' phases before etcd (`kubeadm join phase
 *   control-plane-prepare all`: discovery, the certificates' download, certificates, kubeconfigs,
 *   manifests) run outside the gate, on the four joiners at once from the start; each joiner's
 *   agent starts once its prepare is done and runs the rest (`check-etcd`, `etcd-join`) inside.
 *   The roles are fixed: host 0's agent, started first, is the only one asking before the cluster
 *   exists (a prepare waits for it), so it bootstraps.
 * - **pipelined** (E): as D, and each join inside the gate leaves out `check-etcd` too (kubeadm's
 *   wait, before its add, for every member to answer etcd's status): the gate orders the adds
 *   (the start rule) and etcd refuses an add that would not be safe by itself (its health check),
 *   so a join's add no longer waits for the member before it to serve clients.
 *
 * Set-up (the lab, the broker, the cluster's CA) is outside the clock, as is tearing down. A round
 * whose checks fail (five started voters in every member's view, one cluster ID, no learner left,
 * no etcd log with "member count is unequal", no kubeadm output with "too many learner members",
 * every process exited 0) is reported as failed, not timed. Needs root (the lab) and the
 * Kubernetes builds (never built from here).
 * @module
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { BrokeredKubeLab, NODES, recipeKubeLab, startedVoters, type KubeLab, type MemberList } from "../test/lab/kubeadm-lab.ts";
import { kubeBinaries, runKubeadm, type KubeBinaries, type KubeadmRun } from "../test/lab/kubeadm.ts";
import { labUnavailable } from "../test/lab/lab.ts";
import { kubePin } from "../scripts/kube.mjs";
import { scratchDir } from "./support/paths.ts";
import { log, median, round, sleep } from "./support/stats.ts";

export const KUBEADM_ARMS = ["serial", "serialized", "start-rule", "prepared", "pipelined"] as const;
export type KubeadmArm = (typeof KUBEADM_ARMS)[number];

export interface KubeadmGateSettings {
  rounds: number;
  /** The start-rule arm's maxInFlight, and its etcd's --max-learners. */
  maxInFlight: number;
  /** The arms to run, in this order each round (default all). */
  arms?: KubeadmArm[];
}

/** One process's run: a `kubeadm` (serial) or an agent with its recipe (gated), in s from the arm's start. */
export interface KubeadmNodeRun {
  node: string;
  role: "bootstrap" | "join" | "?";
  /** The command started (serial) or the agent admitted and its recipe started (gated). */
  startS: number;
  /** etcd listed the node's member started (gated: the agent's report). */
  memberStartedS?: number;
  /** kubeadm exited. */
  kubeadmExitS: number;
  /** prepared arm: `kubeadm join phase control-plane-prepare all` (started at 0) exited. */
  prepareExitS?: number;
  /** The agent exited (gated). */
  agentExitS?: number;
  /** Its etcd's start to serving clients (its log): a joiner sent a snapshot serves only after etcd's request timeout. */
  etcdServeS?: number;
  /** kubeadm's etcd status calls that timed out (2 s each): waiting for a member that does not serve clients yet. */
  statusTimeouts: number;
  /**
   * From kubeadm's first attempt to add its member to the attempt etcd took, when etcd refused the
   * earlier ones as "unhealthy cluster" (the member asked has not been connected to every voter
   * for 5 s: a voter promoted a moment before holds the next add), in s.
   */
  addHeldS?: number;
}

export interface KubeadmArmRun {
  arm: KubeadmArm;
  round: number;
  ok: boolean;
  /** First command to five started voters with everything exited 0; absent when the round failed. */
  seconds?: number;
  failure?: string;
  maxInFlight: number;
  nodes: KubeadmNodeRun[];
  /** Gated arms: recipes started while another node's recipe still ran. */
  overlappingStarts?: number;
  checks: { voters: number; clusterIds: number; learners: number; memberCountUnequal: number; tooManyLearners: number };
}

export interface KubeadmGateResult {
  kubernetes: string;
  etcd: string;
  rounds: number;
  maxInFlight: number;
  runs: KubeadmArmRun[];
  summary: {
    /** Median seconds per arm over its passed rounds (null when none passed). */
    medians: Record<KubeadmArm, number | null>;
    /** start-rule / serial and serialized / serial, of the medians. */
    startRuleRatio: number | null;
    serializedRatio: number | null;
    /** prepared / serial. */
    preparedRatio?: number | null;
    /** pipelined / serial. */
    pipelinedRatio?: number | null;
    failedRounds: number;
  };
}

/** Why the benchmark cannot run here (not root, the builds absent), or null. */
export async function kubeadmGateSkipReason(): Promise<string | null> {
  const lab = await labUnavailable();
  if (lab) return `the lab cannot run here: ${lab}`;
  const bins = kubeBinaries();
  if (typeof bins === "string")
    return `the Kubernetes builds are absent (${bins.replace(/ \(.*\)$/, "")}); build them once with \`node scripts/kube.mjs path kubeadm\`, \`node scripts/kube.mjs path kube-apiserver\` and \`node scripts/kube.mjs path etcd\` (about 15 minutes on 2 cores), then run again`;
  return null;
}

const RUN_BUDGET_MS = 480_000;
const sinceS = (t0: number, t: number) => round((t - t0) / 1000, 2);
/** Labs open right now, destroyed on a signal. */
const open = new Set<{ close(): Promise<void> }>();

export async function destroyKubeadmLabs(): Promise<void> {
  await Promise.all([...open].map((l) => l.close().catch(() => undefined)));
}

/**
 * Polls every member's own view until each lists five started voters (no learner), then checks
 * one cluster ID and the logs. Resolves with when it passed (performance.now()) and the checks.
 */
async function endState(k: KubeLab, outputs: string[], nodes: KubeadmNodeRun[]): Promise<{ at: number; checks: KubeadmArmRun["checks"]; failure?: string }> {
  const deadline = Date.now() + 120_000;
  let views: (MemberList | null)[] = [];
  for (;;) {
    views = await Promise.all(NODES.map((n) => k.members(n).catch(() => null)));
    if (views.every((l) => l && l.members.length === NODES.length && startedVoters(l).length === NODES.length)) break;
    if (Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  const at = performance.now();
  for (const x of nodes) {
    const serve = etcdServeSeconds(join(k.out, `${x.node}-etcd-${x.node}.log`));
    if (serve !== undefined) x.etcdServeS = serve;
  }
  const answered = views.filter((l): l is MemberList => l !== null);
  const etcdLogs = readdirSync(k.out).filter((f) => /-etcd-/.test(f) && f.endsWith(".log"));
  const checks = {
    voters: Math.min(...NODES.map((_, i) => (views[i] ? startedVoters(views[i]!).length : 0))),
    clusterIds: new Set(answered.map((l) => l.header.cluster_id)).size,
    learners: Math.max(0, ...answered.map((l) => l.members.filter((m) => m.isLearner).length)),
    memberCountUnequal: etcdLogs.filter((f) => readFileSync(join(k.out, f), "utf8").includes("member count is unequal")).length,
    tooManyLearners: outputs.filter((o) => o.includes("too many learner members")).length,
  };
  const problems = [
    answered.length < NODES.length && `${NODES.length - answered.length} member(s) did not answer`,
    checks.voters < NODES.length && `${checks.voters} started voters in the worst view`,
    checks.clusterIds !== 1 && `${checks.clusterIds} cluster IDs`,
    checks.learners > 0 && `${checks.learners} learner(s) left`,
    checks.memberCountUnequal > 0 && `${checks.memberCountUnequal} etcd log(s) with "member count is unequal"`,
    checks.tooManyLearners > 0 && `${checks.tooManyLearners} kubeadm run(s) met "too many learner members"`,
  ].filter(Boolean);
  return { at, checks, ...(problems.length ? { failure: problems.join("; ") } : {}) };
}

/** From the first "starting an etcd server" to the first "serving client traffic" after it in an etcd log, in s. */
function etcdServeSeconds(path: string): number | undefined {
  if (!existsSync(path)) return undefined;
  let start: number | undefined;
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      const e = JSON.parse(line) as { ts?: string; msg?: string };
      if (start === undefined && e.msg === "starting an etcd server") start = Date.parse(e.ts!);
      else if (start !== undefined && e.msg?.startsWith("serving client traffic")) return round((Date.parse(e.ts!) - start) / 1000, 2);
    } catch {
      /* not a log entry */
    }
  }
  return undefined;
}

const statusTimeouts = (output: string) => (output.match(/Failed to get etcd status/g) ?? []).length;

/** kubeadm's (klog's) time of day on a line, in s. */
const klogSeconds = (line: string) => {
  const t = /^[IWE]\d{4} (\d\d):(\d\d):(\d\d\.\d+)/.exec(line);
  return t ? Number(t[1]) * 3600 + Number(t[2]) * 60 + Number(t[3]) : NaN;
};

/** How long etcd's health check held kubeadm's member add (KubeadmNodeRun.addHeldS), or undefined when it did not. */
export function addHeldSeconds(output: string): number | undefined {
  if (!/Failed to add etcd member: etcdserver: unhealthy cluster/.test(output)) return undefined;
  const attempts = output.split("\n").filter((l) => /\[etcd\] Adding etcd member ".*" as learner/.test(l));
  const first = klogSeconds(attempts[0] ?? "");
  const last = klogSeconds(attempts.at(-1) ?? "");
  if (Number.isNaN(first) || Number.isNaN(last)) return undefined;
  return round((last - first + 86_400) % 86_400, 2);
}

/** The optional per-node measurements read off kubeadm's output. */
const fromOutput = (output: string) => {
  const held = addHeldSeconds(output);
  return { statusTimeouts: statusTimeouts(output), ...(held !== undefined ? { addHeldS: held } : {}) };
};

/** A: the recipe's commands by hand, one host after another. */
async function serialArm(bins: KubeBinaries, round: number, out: string): Promise<KubeadmArmRun> {
  const k = await recipeKubeLab(`serial-r${round}`, bins, { outDir: join(out, `serial-r${round}`) });
  open.add(k);
  const nodes: KubeadmNodeRun[] = [];
  const outputs: string[] = [];
  try {
    const t0 = performance.now();
    const steps: [string, "bootstrap" | "join", string[]][] = NODES.map((n, i) =>
      i === 0
        ? [n, "bootstrap", ["init", "--config", "/etc/kubeadm/init.yaml", "--upload-certs", "-v=5"]]
        : [n, "join", ["join", "--config", "/etc/kubeadm/join.yaml", "-v=5"]],
    );
    for (const [node, role, args] of steps) {
      const startS = sinceS(t0, performance.now());
      const run: KubeadmRun = await runKubeadm(k.lab, node, bins.kubeadm, args, { timeoutMs: RUN_BUDGET_MS });
      k.keep(`kubeadm-${args[0]}-${node}`, run);
      outputs.push(run.output);
      nodes.push({ node, role, startS, kubeadmExitS: sinceS(t0, performance.now()), ...fromOutput(run.output) });
      if (run.code !== 0)
        return failed(
          "serial",
          round,
          1,
          nodes,
          `kubeadm ${args[0]} on ${node} exited ${run.code}: ${/^error: .*$/m.exec(run.output)?.[0] ?? run.output.trim().split("\n").at(-1)}`,
        );
    }
    const end = await endState(k, outputs, nodes);
    return {
      arm: "serial",
      round,
      maxInFlight: 1,
      nodes,
      checks: end.checks,
      ...(end.failure ? { ok: false, failure: end.failure } : { ok: true, seconds: sinceS(t0, end.at) }),
    };
  } finally {
    open.delete(k);
    await k.close();
  }
}

function failed(arm: KubeadmArm, round: number, maxInFlight: number, nodes: KubeadmNodeRun[], failure: string): KubeadmArmRun {
  return { arm, round, ok: false, failure, maxInFlight, nodes, checks: { voters: 0, clusterIds: 0, learners: 0, memberCountUnequal: 0, tooManyLearners: 0 } };
}

/** B and C: five agents with the recipe, started at once against join-broker serve. */
async function gatedArm(arm: "serialized" | "start-rule", bins: KubeBinaries, round: number, out: string, maxInFlight: number): Promise<KubeadmArmRun> {
  const b = await BrokeredKubeLab.create(`${arm}-r${round}`, bins, {
    policy: { maxInFlight },
    ...(maxInFlight > 1 ? { cluster: { etcdExtraArgs: { "max-learners": String(maxInFlight) } } } : {}),
    outDir: join(out, `${arm}-r${round}`),
  });
  open.add(b);
  try {
    const t0 = performance.now();
    const wall0 = Date.now();
    for (const n of NODES) b.startAgent(n);
    return await gatedOutcome(b, arm, round, maxInFlight, t0, wall0, (n) => b.kubeadmOutput(n));
  } finally {
    open.delete(b);
    await b.close();
  }
}

/** Waits for every agent of a gated arm to exit, then for the end state; `output(node)` is all kubeadm printed there. */
async function gatedOutcome(
  b: BrokeredKubeLab,
  arm: KubeadmArm,
  round: number,
  maxInFlight: number,
  t0: number,
  wall0: number,
  output: (node: string) => string,
): Promise<KubeadmArmRun> {
  const deadline = Date.now() + RUN_BUDGET_MS;
  while (!NODES.every((n) => b.h.current(n)?.exit) && Date.now() < deadline) await sleep(100);
  const exits = NODES.every((n) => b.h.current(n)?.exit) ? NODES.map((n) => b.h.current(n)!.exit!) : null;
  const exitedAt = performance.now();
  const nodes = NODES.map((n) => nodeRun(b, n, wall0));
  if (!exits) return failed(arm, round, maxInFlight, nodes, `not every agent exited within ${RUN_BUDGET_MS / 1000} s\n${b.h.describeAgents()}`);
  const bad = NODES.filter((_, i) => exits[i]!.code !== 0);
  if (bad.length)
    return failed(
      arm,
      round,
      maxInFlight,
      nodes,
      `agents exited otherwise than 0: ${bad.map((n) => `${n} ${exits[NODES.indexOf(n)]!.code ?? exits[NODES.indexOf(n)]!.signal}`).join(", ")}\n${b.h.describeAgents()}`,
    );
  const end = await endState(b.k, NODES.map(output), nodes);
  // Recipes started while another node's still ran (from its `exec` to its `exec-exit`).
  const overlappingStarts = nodes.filter((x) => nodes.some((y) => y !== x && y.startS < x.startS && y.kubeadmExitS > x.startS)).length;
  const result = { arm, round, maxInFlight, nodes, overlappingStarts, checks: end.checks };
  return end.failure ? { ...result, ok: false, failure: end.failure } : { ...result, ok: true, seconds: sinceS(t0, Math.max(exitedAt, end.at)) };
}

/** The prepared arm's joiners: the recipe's join with the phases before etcd left out (done before the gate). */
const PREPARED_RECIPE = [
  'if [ "$JOIN_BROKER_ROLE" = bootstrap ]; then',
  "  kubeadm init --config /etc/kubeadm/init.yaml --upload-certs -v=5",
  "else",
  "  kubeadm join --config /etc/kubeadm/join-prepared.yaml -v=5 || { s=$?; kubeadm reset -f; exit $s; }",
  "fi",
].join("\n");

/** D (and E): the phases before etcd outside the gate, in parallel; the rest through it, under the start rule (E: without check-etcd). */
async function preparedArm(
  bins: KubeBinaries,
  round: number,
  out: string,
  maxInFlight: number,
  arm: "prepared" | "pipelined" = "prepared",
): Promise<KubeadmArmRun> {
  const b = await BrokeredKubeLab.create(`${arm}-r${round}`, bins, {
    policy: { maxInFlight },
    cluster: { etcdExtraArgs: { "max-learners": String(maxInFlight) } },
    outDir: join(out, `${arm}-r${round}`),
  });
  open.add(b);
  const [first, ...joiners] = NODES as [string, ...string[]];
  for (const n of joiners) {
    const dir = b.lab.host(n).mounts.get("/etc/kubeadm")!;
    const config = parse(readFileSync(join(dir, "join.yaml"), "utf8")) as { skipPhases: string[] };
    config.skipPhases = [...config.skipPhases, "control-plane-prepare", ...(arm === "pipelined" ? ["check-etcd"] : [])];
    writeFileSync(join(dir, "join-prepared.yaml"), stringify(config));
  }
  try {
    const t0 = performance.now();
    const wall0 = Date.now();
    b.startAgent(first);
    const prepareExit = new Map<string, number>();
    const prepareOutput = new Map<string, string>();
    const prepares = await Promise.all(
      joiners.map(async (n) => {
        const run = await runKubeadm(b.lab, n, bins.kubeadm, ["join", "phase", "control-plane-prepare", "all", "--config", "/etc/kubeadm/join.yaml", "-v=5"], {
          timeoutMs: RUN_BUDGET_MS,
        });
        prepareExit.set(n, sinceS(t0, performance.now()));
        prepareOutput.set(n, run.output);
        b.k.keep(`kubeadm-prepare-${n}`, run);
        if (run.code === 0) b.startAgent(n, PREPARED_RECIPE);
        return run.code === 0 ? null : `${n}: kubeadm join phase control-plane-prepare exited ${run.code}`;
      }),
    );
    const withPrepare = (x: KubeadmNodeRun) => (prepareExit.has(x.node) ? { ...x, prepareExitS: prepareExit.get(x.node)! } : x);
    const prepareFailed = prepares.filter(Boolean);
    if (prepareFailed.length)
      return failed(
        arm,
        round,
        maxInFlight,
        NODES.map((n) => withPrepare(nodeRun(b, n, wall0))),
        prepareFailed.join("; "),
      );
    const outcome = await gatedOutcome(b, arm, round, maxInFlight, t0, wall0, (n) => `${prepareOutput.get(n) ?? ""}${b.kubeadmOutput(n)}`);
    return { ...outcome, nodes: outcome.nodes.map(withPrepare) };
  } finally {
    open.delete(b);
    await b.close();
  }
}

/** A gated node's run from its agent's progress events, in s from the arm's start. */
function nodeRun(b: BrokeredKubeLab, node: string, wall0: number): KubeadmNodeRun {
  const run = b.h.current(node);
  if (!run) return { node, role: "?", statusTimeouts: 0, startS: NaN, kubeadmExitS: NaN };
  const at = (step: string) => {
    const e = run.events.find((x) => x.step === step);
    return e ? round((Date.parse(e.time) - wall0) / 1000, 2) : undefined;
  };
  const exec = run.events.find((e) => e.step === "exec");
  const role = exec?.role === "bootstrap" || exec?.role === "join" ? exec.role : "?";
  const started = at("member-started");
  const agentExit = at("joined");
  return {
    node,
    role,
    ...fromOutput(b.kubeadmOutput(node)),
    startS: at("exec") ?? NaN,
    ...(started !== undefined ? { memberStartedS: started } : {}),
    kubeadmExitS: at("exec-exit") ?? NaN,
    ...(agentExit !== undefined ? { agentExitS: agentExit } : {}),
  };
}

export async function kubeadmGate(settings: KubeadmGateSettings): Promise<KubeadmGateResult | { skipped: string }> {
  const skip = await kubeadmGateSkipReason();
  if (skip) return { skipped: skip };
  const bins = kubeBinaries() as KubeBinaries;
  const out = join(scratchDir(), "kubeadm");
  const runs: KubeadmArmRun[] = [];
  for (let r = 0; r < settings.rounds; r++) {
    for (const arm of settings.arms ?? KUBEADM_ARMS) {
      log(`kubeadm: round ${r + 1}/${settings.rounds}, ${arm}…`);
      const run =
        arm === "serial"
          ? await serialArm(bins, r, out)
          : arm === "prepared" || arm === "pipelined"
            ? await preparedArm(bins, r, out, settings.maxInFlight, arm)
            : await gatedArm(arm, bins, r, out, arm === "serialized" ? 1 : settings.maxInFlight);
      runs.push(run);
      log(
        run.ok
          ? `kubeadm: ${arm} ${run.seconds} s (${run.nodes.map((x) => `${x.node} ${x.role} ${x.startS}→${x.kubeadmExitS}`).join(", ")})`
          : `kubeadm: ${arm} FAILED: ${run.failure}`,
      );
    }
  }
  const etcd = existsSync(bins.etcd) ? (bins.etcd.split("/").at(-2) ?? kubePin().etcd) : kubePin().etcd;
  return {
    kubernetes: kubePin().release,
    etcd,
    rounds: settings.rounds,
    maxInFlight: settings.maxInFlight,
    runs,
    summary: summarizeKubeadm(runs),
  };
}

/** Medians per arm over its passed rounds only (a failed round is not timed), and their ratios to the serial script's. */
export function summarizeKubeadm(runs: readonly KubeadmArmRun[]): KubeadmGateResult["summary"] {
  const medianOf = (arm: KubeadmArm) => {
    const xs = runs.filter((x) => x.arm === arm && x.ok && x.seconds !== undefined).map((x) => x.seconds!);
    return xs.length ? round(median(xs), 2) : null;
  };
  const medians = Object.fromEntries(KUBEADM_ARMS.map((a) => [a, medianOf(a)])) as Record<KubeadmArm, number | null>;
  const ratio = (a: number | null, b: number | null) => (a !== null && b !== null ? round(a / b, 3) : null);
  return {
    medians,
    startRuleRatio: ratio(medians["start-rule"], medians.serial),
    serializedRatio: ratio(medians.serialized, medians.serial),
    preparedRatio: ratio(medians.prepared, medians.serial),
    pipelinedRatio: ratio(medians.pipelined, medians.serial),
    failedRounds: runs.filter((x) => !x.ok).length,
  };
}
