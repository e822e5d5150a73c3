/**
 * (9) k0s through the gate: four real k0s controllers (1 + 3) on lab hosts (test/lab/k0s-lab.ts),
 * per k0s version and round, each arm on a fresh lab, one after another, timed from the first
 * command to four started etcd voters in every controller's own view:
 *
 * - **serial**: a script that joins them one by one, as k0sctl does: `k0s controller` on the first
 *   host (the cluster's CAs copied in, as docs/k0s.md's bootstrap does), and once it is up (its
 *   etcd member a started voter, its join API accepting connections) `k0s controller --token-file`
 *   on the next host, and so on, each waiting for the one before; no broker.
 * - **gate**: `join-broker serve` on a host of its own and the four controllers running
 *   docs/k0s.md's unit (`join-broker join … --exec 'k0s controller …'`), started at once: the broker
 *   picks the bootstrap node and admits one join at a time.
 * - **gate-checked**: the same with the patched k0s whose join API checks the admission
 *   (`<version>+broker`, integrations/k0s/), when it is built: what the check costs.
 *
 * Set-up (the lab, the CAs, the token, the broker) is outside the clock, as is tearing down. A
 * round whose checks fail (four started voters in every view, one cluster ID, no learner left;
 * the gated arms: every agent said its node joined, no unit restarted) is reported as failed, not
 * timed. Needs root (the lab) and the k0s, etcd and kube-apiserver builds (never built from here:
 * `node scripts/k0s.mjs list`, `node scripts/kube.mjs path kube-apiserver`). Hold the lab lock
 * (`flock /tmp/jb-lab.lock npm run bench -- --only k0s`) on a shared machine.
 * @module
 */
import { join } from "node:path";
import { K0S_VERSIONS } from "../scripts/k0s.mjs";
import {
  BrokeredK0sLab,
  disabledComponents,
  K0S_API_PORT,
  K0S_HOSTS,
  K0sLab,
  k0sBinaries,
  startedVoters,
  type K0sBinaries,
  type MemberList,
} from "../test/lab/k0s-lab.ts";
import { labUnavailable } from "../test/lab/lab.ts";
import { scratchDir } from "./support/paths.ts";
import { log, median, round, sleep } from "./support/stats.ts";

export const K0S_ARMS = ["serial", "gate", "gate-checked"] as const;
export type K0sArm = (typeof K0S_ARMS)[number];
export type K0sBenchVersion = "1.28" | "1.36";

export interface K0sBenchSettings {
  rounds: number;
  /** Default both pinned versions. */
  versions?: K0sBenchVersion[];
  /** Default every arm (gate-checked only where the patched k0s is built). */
  arms?: K0sArm[];
}

/** One controller's run, in s from the arm's start. */
export interface K0sNodeRun {
  node: string;
  role: "bootstrap" | "join" | "?";
  /** Its `k0s controller` started (gated: the agent admitted and its recipe started). */
  startS: number;
  /** Its etcd member seen as a started voter (gated: the agent's `joined`). */
  voterS?: number;
}

export interface K0sArmRun {
  version: K0sBenchVersion;
  /** What ran: `v1.28.14+k0s.0`, `v1.28.14+k0s.0 +broker`. */
  release: string;
  arm: K0sArm;
  round: number;
  ok: boolean;
  /** First command to four started voters in every view; absent when the round failed. */
  seconds?: number;
  failure?: string;
  nodes: K0sNodeRun[];
  checks: { voters: number; clusterIds: number; learners: number; restarts: number };
}

export interface K0sVersionSummary {
  version: K0sBenchVersion;
  release: string;
  etcd: string;
  /** Median seconds per arm over its passed rounds (null when none passed or it did not run). */
  medians: Record<K0sArm, number | null>;
  /** gate / serial and gate-checked / serial, of the medians. */
  gateRatio: number | null;
  checkedRatio: number | null;
  failedRounds: number;
}

export interface K0sBenchResult {
  rounds: number;
  runs: K0sArmRun[];
  summary: K0sVersionSummary[];
  /** Arms that could not run, and why (the patched k0s not built). */
  notRun: string[];
}

/** Why the benchmark cannot run here (not root, the builds absent), or null. */
export async function k0sBenchSkipReason(versions: readonly K0sBenchVersion[]): Promise<string | null> {
  const lab = await labUnavailable();
  if (lab) return `the lab cannot run here: ${lab}`;
  const missing = versions.map((v) => k0sBinaries(v)).filter((b): b is string => typeof b === "string");
  if (missing.length)
    return `${missing.join("; ")}; build them once with \`node scripts/k0s.mjs list\` and \`node scripts/kube.mjs path kube-apiserver\`, then run again`;
  return null;
}

const RUN_BUDGET_MS = 600_000;
const sinceS = (t0: number, t: number) => round((t - t0) / 1000, 2);
const open = new Set<{ close(): Promise<void> }>();

export async function destroyK0sLabs(): Promise<void> {
  await Promise.all([...open].map((l) => l.close().catch(() => undefined)));
}

const EMPTY: MemberList = { header: { cluster_id: "", member_id: "" }, members: [] };

/** Whether the host's k0s join API answers HTTPS (any status), asked from the host itself. */
function apiUp(k: K0sLab, host: string): boolean {
  try {
    k.lab.exec(host, "curl", ["-sk", "--max-time", "2", "-o", "/dev/null", `https://${k.lab.host(host).ip}:${K0S_API_PORT}/`]);
    return true;
  } catch {
    return false;
  }
}

/** The member list of the host's etcd with `peerURL` as a started voter, or null. */
function voterIn(k: K0sLab, host: string, peerURL: string): MemberList | null {
  const list = k.members(host);
  return list && startedVoters(list).some((m) => m.peerURLs?.includes(peerURL)) ? list : null;
}

/** Polls every host's own view until each lists four started voters; then the checks. */
async function endState(k: K0sLab, deadline: number): Promise<{ at: number; checks: Omit<K0sArmRun["checks"], "restarts">; failure?: string }> {
  let views: (MemberList | null)[] = [];
  for (;;) {
    views = K0S_HOSTS.map((h) => k.members(h));
    if (views.every((l) => l && l.members.length === K0S_HOSTS.length && startedVoters(l).length === K0S_HOSTS.length)) break;
    if (Date.now() > deadline) break;
    await sleep(250);
  }
  const at = performance.now();
  const answered = views.filter((l): l is MemberList => l !== null);
  const checks = {
    voters: Math.min(...views.map((l) => startedVoters(l ?? EMPTY).length)),
    clusterIds: new Set(answered.map((l) => l.header.cluster_id)).size,
    learners: Math.max(0, ...answered.map((l) => l.members.filter((m) => m.isLearner).length)),
  };
  const problems = [
    answered.length < K0S_HOSTS.length && `${K0S_HOSTS.length - answered.length} host(s)' etcd did not answer`,
    checks.voters < K0S_HOSTS.length && `${checks.voters} started voters in the worst view`,
    checks.clusterIds !== 1 && `${checks.clusterIds} cluster IDs`,
    checks.learners > 0 && `${checks.learners} learner(s) left`,
  ].filter(Boolean);
  return { at, checks, ...(problems.length ? { failure: problems.join("; ") } : {}) };
}

function failed(bins: K0sBinaries, arm: K0sArm, round: number, nodes: K0sNodeRun[], failure: string, restarts = 0): K0sArmRun {
  return { version: bins.version, release: bins.release, arm, round, ok: false, failure, nodes, checks: { voters: 0, clusterIds: 0, learners: 0, restarts } };
}

/** serial: one controller after another, each once the one before is up, as k0sctl joins them. */
async function serialArm(bins: K0sBinaries, round: number, out: string): Promise<K0sArmRun> {
  const k = await K0sLab.create(`bench-serial-${bins.version}-r${round}`, bins, { hosts: K0S_HOSTS, outDir: join(out, `${bins.version}-serial-r${round}`) });
  open.add(k);
  const nodes: K0sNodeRun[] = [];
  try {
    const flags = ["controller", "--config", "/etc/k0s/k0s.yaml", `--disable-components=${disabledComponents(bins.version)}`];
    const deadline = Date.now() + RUN_BUDGET_MS;
    const t0 = performance.now();
    for (const [i, host] of K0S_HOSTS.entries()) {
      const startS = sinceS(t0, performance.now());
      if (i === 0) k.exec(host, "sh", ["-c", "mkdir -p /var/lib/k0s && cp -a /etc/k0s/pki /var/lib/k0s/"]);
      k.service(host, "k0s", i === 0 ? flags : [...flags, "--token-file", "/etc/k0s/controller-token"]).start();
      const ip = k.lab.host(host).ip;
      const peerURL = `https://${ip}:2380`;
      const leader = K0S_HOSTS[0]!;
      // Up: its member a started voter (in the first host's view), its join API accepting connections.
      for (;;) {
        if (voterIn(k, leader, peerURL) && apiUp(k, host)) break;
        const unit = k.services.get(`k0scontroller@${host}`)!;
        if (unit.runs.length > 1)
          return failed(
            bins,
            "serial",
            round,
            nodes,
            `${host}'s k0s exited: ${
              unit
                .output()
                .split("\n")
                .filter((l) => /level=error|^Error/.test(l))
                .at(-1) ?? ""
            }`,
          );
        if (Date.now() > deadline) return failed(bins, "serial", round, nodes, `${host} was not up within ${RUN_BUDGET_MS / 1000} s`);
        await sleep(250);
      }
      nodes.push({ node: host, role: i === 0 ? "bootstrap" : "join", startS, voterS: sinceS(t0, performance.now()) });
    }
    const end = await endState(k, deadline);
    const checks = { ...end.checks, restarts: 0 };
    return {
      version: bins.version,
      release: bins.release,
      arm: "serial",
      round,
      nodes,
      checks,
      ...(end.failure ? { ok: false, failure: end.failure } : { ok: true, seconds: sinceS(t0, end.at) }),
    };
  } finally {
    open.delete(k);
    await k.close();
  }
}

/** gate / gate-checked: the four units at once through the broker. */
async function gatedArm(arm: "gate" | "gate-checked", bins: K0sBinaries, round: number, out: string): Promise<K0sArmRun> {
  const b = await BrokeredK0sLab.create(`bench-${arm}-${bins.version}-r${round}`, bins, K0S_HOSTS, { outDir: join(out, `${bins.version}-${arm}-r${round}`) });
  open.add(b);
  try {
    const deadline = Date.now() + RUN_BUDGET_MS;
    const t0 = performance.now();
    const wall0 = Date.now();
    for (const h of K0S_HOSTS) b.startService(h);
    const joined = () => K0S_HOSTS.every((h) => b.h.current(h)?.events.some((e) => e.step === "joined"));
    while (!joined() && Date.now() < deadline) await sleep(250);
    const restarts = K0S_HOSTS.reduce((n, h) => n + (b.h.runs.get(h)?.length ?? 1) - 1, 0);
    const nodes = K0S_HOSTS.map((h) => nodeRun(b, h, wall0));
    if (!joined())
      return failed(bins, arm, round, nodes, `not every agent said its node joined within ${RUN_BUDGET_MS / 1000} s\n${b.h.describeAgents()}`, restarts);
    const end = await endState(b.k, deadline);
    const checks = { ...end.checks, restarts };
    const failure = [end.failure, restarts > 0 && `${restarts} unit restart(s)`].filter(Boolean).join("; ");
    return {
      version: bins.version,
      release: bins.release,
      arm,
      round,
      nodes,
      checks,
      ...(failure ? { ok: false, failure } : { ok: true, seconds: sinceS(t0, end.at) }),
    };
  } finally {
    open.delete(b);
    await b.close();
  }
}

/** A gated node's run from its agent's progress events, in s from the arm's start. */
function nodeRun(b: BrokeredK0sLab, node: string, wall0: number): K0sNodeRun {
  const run = b.h.current(node);
  if (!run) return { node, role: "?", startS: NaN };
  const at = (step: string) => {
    const e = run.events.find((x) => x.step === step);
    return e ? round((Date.parse(e.time) - wall0) / 1000, 2) : undefined;
  };
  const exec = run.events.find((e) => e.step === "exec");
  const role = exec?.role === "bootstrap" || exec?.role === "join" ? exec.role : "?";
  const voter = at("joined");
  return { node, role, startS: at("exec") ?? NaN, ...(voter !== undefined ? { voterS: voter } : {}) };
}

export async function k0sGate(settings: K0sBenchSettings): Promise<K0sBenchResult | { skipped: string }> {
  const versions = settings.versions ?? [...K0S_VERSIONS];
  const skip = await k0sBenchSkipReason(versions);
  if (skip) return { skipped: skip };
  const out = join(scratchDir(), "k0s");
  const runs: K0sArmRun[] = [];
  const notRun: string[] = [];
  for (let r = 0; r < settings.rounds; r++) {
    for (const version of versions) {
      for (const arm of settings.arms ?? K0S_ARMS) {
        const bins = k0sBinaries(version, arm === "gate-checked" ? "broker" : null);
        if (typeof bins === "string") {
          const why = `k0s ${version} ${arm}: ${bins}`;
          if (!notRun.includes(why)) notRun.push(why);
          log(`k0s: ${why}`);
          continue;
        }
        log(`k0s: round ${r + 1}/${settings.rounds}, ${bins.release}, ${arm}…`);
        const run = arm === "serial" ? await serialArm(bins, r, out) : await gatedArm(arm, bins, r, out);
        runs.push(run);
        log(
          run.ok
            ? `k0s: ${bins.release} ${arm} ${run.seconds} s (${run.nodes.map((x) => `${x.node} ${x.role} ${x.startS}→${x.voterS ?? "?"}`).join(", ")})`
            : `k0s: ${bins.release} ${arm} FAILED: ${run.failure}`,
        );
      }
    }
  }
  return { rounds: settings.rounds, runs, summary: summarizeK0s(runs, versions), notRun };
}

/** Medians per version and arm over its passed rounds only (a failed round is not timed), and their ratios to the serial script's. */
export function summarizeK0s(runs: readonly K0sArmRun[], versions: readonly K0sBenchVersion[]): K0sVersionSummary[] {
  return versions.map((version) => {
    const mine = runs.filter((x) => x.version === version);
    const medianOf = (arm: K0sArm) => {
      const xs = mine.filter((x) => x.arm === arm && x.ok && x.seconds !== undefined).map((x) => x.seconds!);
      return xs.length ? round(median(xs), 2) : null;
    };
    const medians = Object.fromEntries(K0S_ARMS.map((a) => [a, medianOf(a)])) as Record<K0sArm, number | null>;
    const ratio = (a: number | null, b: number | null) => (a !== null && b !== null ? round(a / b, 3) : null);
    const bins = k0sBinaries(version);
    return {
      version,
      release: mine.find((x) => x.arm === "serial")?.release ?? (typeof bins === "string" ? version : bins.release),
      etcd: typeof bins === "string" ? "" : (bins.etcd.split("/").at(-2) ?? ""),
      medians,
      gateRatio: ratio(medians.gate, medians.serial),
      checkedRatio: ratio(medians["gate-checked"], medians.serial),
      failedRounds: mine.filter((x) => !x.ok).length,
    };
  });
}
