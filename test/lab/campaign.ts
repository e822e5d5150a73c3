/**
 * The fault campaign: per seed, a 1 + N join in a lab (test/lab/lab.ts) under a seeded schedule
 * of faults (partitions one- and two-way, loss, link flaps, pauses, SIGKILLs, skewed clocks),
 * then everything healed, then a bounded wait. The invariants are checked at every sample
 * (every second) and at the end; a seed's result says which failed and the sample that showed it.
 * The bounds are the documented ones (docs/lab.md): change them there too.
 */
import { ClusterHarness, hex } from "../support/cluster.ts";
import { installerCommand } from "../support/gate.ts";
import { between, pick, seededRandom } from "../support/seeded.ts";
import { Lab } from "./lab.ts";

export const BOUNDS = {
  /** Faults start within this long after the agents start. */
  faultWindowMs: 40_000,
  /** The longest partition (and loss) a node must survive without giving up. */
  maxPartitionMs: 30_000,
  maxFlapMs: 8_000,
  maxPauseMs: 10_000,
  /** An agent's clock may be this far off: its lease is measured on the broker's clock. */
  maxAgentSkewSeconds: 300,
  /** The join API's clock: inside its default --clock-tolerance (30 s). */
  maxJoinApiSkewSeconds: 20,
  /** After healing, every node is a started voter or has exited with its documented code within this. */
  settleMs: 180_000,
  /** The campaign's lease: a slot held by an unreachable node frees within this. */
  leaseSeconds: 20,
} as const;

export type Fault =
  | { kind: "partition"; atMs: number; forMs: number; host: string; from: string[]; oneWay: boolean }
  | { kind: "loss"; atMs: number; forMs: number; host: string; percent: number }
  | { kind: "flap"; atMs: number; forMs: number; host: string }
  | { kind: "pause"; atMs: number; forMs: number; host: string }
  | { kind: "kill"; atMs: number; forMs: number; host: string }
  | { kind: "skew"; atMs: number; forMs: number; host: string; seconds: number };

export interface Violation {
  invariant: string;
  detail: string;
  /** Milliseconds since the seed's run started. */
  tMs?: number;
  sample?: unknown;
}

export interface SeedResult {
  seed: number;
  mode: "join-api" | "gate";
  /** The installer gate mode ran, when it is a real one (`k0s v1.28.14+k0s.0`); else the test installer. */
  installer?: string;
  nodes: string[];
  schedule: Fault[];
  outcome: "pass" | "fail";
  violations: Violation[];
  /** Per node: `joined as bootstrap|join`, `exited N`, or `still running`. */
  ends: Record<string, string>;
  durationMs: number;
  /** The seed's timeline (hosts, faults, agent steps, member samples). */
  timeline: { t: number; kind: string; node?: string; detail?: Record<string, unknown> }[];
  timelinePath?: string;
}

export const nodeNames = (joiners: number) => Array.from({ length: joiners + 1 }, (_, i) => `ctrl-${i}`);

/** What a campaign's fault schedule draws from: its bounds, the hosts beside the nodes, how its kills and skews land. */
export interface ScheduleShape {
  bounds: { faultWindowMs: number; maxPartitionMs: number; maxFlapMs: number; maxPauseMs: number; maxAgentSkewSeconds: number };
  /** Hosts that are not nodes and may be partitioned (or lose packets) too. */
  otherHosts: readonly string[];
  /** How long a killed node stays down, drawn in this range; null: its own supervisor restarts it (forMs 0). */
  killDownMs: readonly [number, number] | null;
  /** The join API host's skew bound: 30% of skews land on it. null: skews land on nodes only. */
  joinApiSkewSeconds: number | null;
}

/** The join-API and gate campaign's shape: the hosts `broker` and `join-api`, kills restarted by the campaign. */
export const CAMPAIGN_SHAPE: ScheduleShape = {
  bounds: BOUNDS,
  otherHosts: ["broker", "join-api"],
  killDownMs: [500, 3_000],
  joinApiSkewSeconds: BOUNDS.maxJoinApiSkewSeconds,
};

/** The seed's fault schedule over these nodes (plus the hosts `broker` and `join-api`). */
export function schedule(seed: number, nodes: string[]): Fault[] {
  return faultSchedule(seed, nodes, CAMPAIGN_SHAPE);
}

/** A seed's faults over these nodes and the shape's other hosts: the same seed and shape, the same schedule. */
export function faultSchedule(seed: number, nodes: string[], shape: ScheduleShape): Fault[] {
  const { bounds, otherHosts } = shape;
  const random = seededRandom(seed);
  const count = between(random, 2, 5);
  const faults: Fault[] = [];
  for (let i = 0; i < count; i++) {
    const atMs = between(random, 0, bounds.faultWindowMs);
    const kind = pick(random, ["partition", "partition", "loss", "flap", "pause", "kill", "skew"] as const);
    const node = pick(random, nodes);
    switch (kind) {
      case "partition": {
        const host = random() < 0.2 ? pick(random, otherHosts) : node;
        const candidates = [...nodes, ...otherHosts].filter((h) => h !== host);
        const from = candidates.filter(() => random() < 0.5);
        faults.push({
          kind,
          atMs,
          forMs: between(random, 2_000, bounds.maxPartitionMs),
          host,
          from: from.length ? from : [pick(random, candidates)],
          oneWay: random() < 0.3,
        });
        break;
      }
      case "loss":
        faults.push({
          kind,
          atMs,
          forMs: between(random, 2_000, bounds.maxPartitionMs),
          host: random() < 0.2 ? pick(random, otherHosts) : node,
          percent: between(random, 10, 50),
        });
        break;
      case "flap":
        faults.push({ kind, atMs, forMs: between(random, 1_000, bounds.maxFlapMs), host: node });
        break;
      case "pause":
        faults.push({ kind, atMs, forMs: between(random, 1_000, bounds.maxPauseMs), host: node });
        break;
      case "kill":
        faults.push({ kind, atMs, forMs: shape.killDownMs ? between(random, shape.killDownMs[0], shape.killDownMs[1]) : 0, host: node });
        break;
      case "skew": {
        const onJoinApi = shape.joinApiSkewSeconds !== null && random() < 0.3;
        const max = onJoinApi ? shape.joinApiSkewSeconds! : bounds.maxAgentSkewSeconds;
        faults.push({ kind, atMs, forMs: 0, host: onJoinApi ? "join-api" : node, seconds: between(random, -max, max) });
        break;
      }
    }
  }
  return faults.sort((a, b) => a.atMs - b.atMs);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A fault of the network (a partition, packet loss, a link flap) for its time, then healed; false for a fault of another kind. */
export async function networkFault(lab: Lab, f: Fault): Promise<boolean> {
  switch (f.kind) {
    case "partition": {
      const id = lab.partition([f.host], f.from, { oneWay: f.oneWay });
      await sleep(f.forMs);
      lab.heal(id);
      return true;
    }
    case "loss":
      lab.loss(f.host, f.percent);
      await sleep(f.forMs);
      lab.loss(f.host, 0);
      return true;
    case "flap":
      await lab.flap(f.host, f.forMs);
      return true;
    default:
      return false;
  }
}

/**
 * How the nodes join: through the join API (`--join-api`, the agent starts etcd), in gate mode
 * (`--exec`: an unmodified installer, kubeadm's etcd phase with etcdctl, adds the member and
 * starts etcd), or alternating by seed (odd seeds through the join API, even seeds gated).
 */
export type JoinMode = "join-api" | "gate" | "alternate";

export const modeOf = (seed: number, mode: JoinMode): "join-api" | "gate" => (mode === "alternate" ? (seed % 2 === 0 ? "gate" : "join-api") : mode);

export interface CampaignOptions {
  joiners: number;
  /** Default `join-api`. */
  mode?: JoinMode;
  log?: (line: string) => void;
}

/** Runs one seed in a lab of its own and checks every invariant. */
export async function runSeed(seed: number, options: CampaignOptions): Promise<SeedResult> {
  const nodes = nodeNames(options.joiners);
  const plan = schedule(seed, nodes);
  const log = options.log ?? (() => undefined);
  const started = Date.now();
  const violations: Violation[] = [];
  const lab = await Lab.create();
  let h: ClusterHarness | null = null;
  const ends: Record<string, string> = {};
  try {
    h = await ClusterHarness.start({ scenario: "campaign", seed, nodes, lab, policy: { leaseSeconds: BOUNDS.leaseSeconds } });
    const x = h;
    const mode = modeOf(seed, options.mode ?? "join-api");
    x.timeline.add("schedule", undefined, { mode, faults: plan });
    // A restarted agent joins the same way as its first run.
    const agentArgs = new Map<string, string[] | undefined>();
    // Gate mode as a service unit runs it: `--service` starts the installer again on every later run.
    for (const n of nodes)
      agentArgs.set(n, mode === "gate" ? x.gateAgentArgs(x.node(n), await installerCommand(x, x.node(n), { foreground: true }), ["--service"]) : undefined);
    const startAgent = (n: string) => x.startAgent(n, { args: agentArgs.get(n) });
    const violated = new Set<string>();
    const record = (v: Violation) => {
      if (violated.has(v.invariant)) return; // the first sample that shows it is the one to read
      violated.add(v.invariant);
      violations.push({ tMs: x.timeline.now(), ...v });
      x.timeline.add("invariant-violated", undefined, { ...v });
      log(`seed ${seed}: ${v.invariant}: ${v.detail}`);
    };
    const checkSamples = () => {
      try {
        x.assertInvariants();
      } catch (e) {
        const entry = x.timeline.entries.find((en) => en.kind === "invariant-violated");
        const detail = String(entry?.detail?.violation ?? (e as Error).message.split("\n")[0]);
        record({
          invariant: /cluster IDs/.test(detail) ? "one-cluster-id" : "learners-within-max-in-flight",
          detail,
          tMs: entry?.t,
          sample: entry?.detail?.samples,
        });
      }
    };
    const paused = new Set<number>();
    const faultsDone: Promise<void>[] = [];
    const apply = async (f: Fault) => {
      await sleep(f.atMs);
      const run = nodes.includes(f.host) ? x.current(f.host) : undefined;
      if (nodes.includes(f.host) && (!run || run.exit)) return void x.timeline.add("fault-skipped", f.host, { ...f, why: "its agent is not running" });
      x.timeline.add(`fault-${f.kind}`, f.host, { ...f });
      try {
        await inflict(f, run?.pid);
      } catch (e) {
        x.timeline.add("fault-failed", f.host, { kind: f.kind, error: (e as Error).message });
      }
      x.timeline.add(`fault-${f.kind}-end`, f.host);
    };
    const inflict = async (f: Fault, pid: number | undefined) => {
      if (await networkFault(lab, f)) return;
      switch (f.kind) {
        case "pause":
          paused.add(pid!);
          lab.pause(pid!);
          await sleep(f.forMs);
          lab.resume(pid!);
          paused.delete(pid!);
          break;
        case "kill":
          await x.kill(f.host, "group");
          await sleep(f.forMs);
          startAgent(f.host);
          break;
        case "skew":
          lab.skew(f.host, f.seconds);
          break;
      }
    };
    const adds = watchAdds(x);
    x.startSampling();
    for (const n of nodes) startAgent(n);
    for (const f of plan) faultsDone.push(apply(f));
    // The faults' own ends, then everything healed at once (skews back to 0).
    const faultsOver = Promise.all(faultsDone);
    while (!(await Promise.race([faultsOver.then(() => true), sleep(1000).then(() => false)]))) checkSamples();
    lab.heal();
    for (const host of lab.hosts.keys()) lab.skew(host, 0);
    for (const pid of paused) lab.resume(pid);
    x.timeline.add("healed");
    log(`seed ${seed}: healed after ${Math.round((Date.now() - started) / 1000)} s`);

    // Within the bound: every node joined or exited (its documented codes: 3 refused, 4 gave up).
    const settled = () => nodes.every((n) => x.joined(n) || !!x.current(n)?.exit);
    const deadline = Date.now() + BOUNDS.settleMs;
    while (!settled() && Date.now() < deadline) {
      checkSamples();
      await sleep(1000);
    }
    await x.sampleNow().catch(() => undefined);
    checkSamples();
    for (const n of nodes) {
      const run = x.current(n)!;
      const role = /^joined cluster \S+ as (\w+)$/m.exec(run.stdout)?.[1];
      ends[n] = role ? `joined as ${role}` : run.exit ? `exited ${run.exit.code ?? run.exit.signal}` : "still running";
    }
    const unsettled = nodes.filter((n) => ends[n] === "still running");
    if (unsettled.length) {
      // Which peers each etcd counts as connected: a voter the leader does not keeps every add refused ("unhealthy cluster").
      const peers = await x.peerConnections().catch((e: Error) => `unknown (${e.message})`);
      record({
        invariant: "settles-within-bound",
        detail: `${unsettled.join(", ")} neither joined nor exited within ${BOUNDS.settleMs / 1000} s of healing: ${x.describeAgents()}\npeer connections: ${peers}`,
      });
    }
    for (const n of nodes) {
      const exit = x.current(n)!.exit;
      if (!exit || x.joined(n)) continue;
      if (exit.code !== 3 && exit.code !== 4) record({ invariant: "documented-exit-code", detail: `${n} exited ${exit.code ?? exit.signal}` });
      // Every fault here is inside the documented bounds: none may make a node give up.
      if (exit.code === 4) record({ invariant: "no-give-up-within-bounds", detail: `${n} gave up: ${x.current(n)!.events.at(-1)?.msg ?? ""}` });
    }
    await checkEnd(x, nodes, record);
    if (mode === "join-api") await checkAddsAdmitted(x, adds, record);
  } catch (e) {
    violations.push({ invariant: "run-completed", detail: (e as Error).stack ?? String(e) });
  }
  {
    const timelinePath = h?.writeTimeline({ ends, violations: violations.map((v) => v.invariant), lab: lab.events });
    // A failing seed keeps every log of its run (etcd's above all) beside its timeline.
    if (violations.length && h) log(`seed ${seed}: logs kept in ${h.keepLogs(`campaign-${seed}-logs`)}`);
    const timeline = h ? seedTimeline(h) : [];
    await h?.cleanup().catch(() => undefined);
    lab.destroy();
    const result: SeedResult = {
      seed,
      mode: modeOf(seed, options.mode ?? "join-api"),
      nodes,
      schedule: plan,
      outcome: violations.length ? "fail" : "pass",
      violations,
      ends,
      durationMs: Date.now() - started,
      timeline,
      timelinePath,
    };
    log(seedSummary(result));
    return result;
  }
}

interface Add {
  /** When this process read the join API's line (its own clock may be skewed; this one is not). */
  at: number;
  node: string;
  /** Null for `node N asked again …: already member …` (an add whose answer was lost logs no line of its own). */
  jti: string | null;
}

/** Every learner the join API says it added (`added learner … (peer, admission JTI)`) or found already added, timed as read. */
function watchAdds(h: ClusterHarness): Add[] {
  const adds: Add[] = [];
  for (const stream of [h.joinApi.proc.stdout, h.joinApi.proc.stderr]) {
    let pending = "";
    stream?.on("data", (chunk: Buffer) => {
      pending += chunk.toString();
      let nl: number;
      while ((nl = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        const m = /added learner [0-9a-f]+ for node (\S+) \(.*, admission (\S+)\)/.exec(line);
        if (m) adds.push({ at: Date.now(), node: m[1]!, jti: m[2]! });
        const again = /node (\S+) asked again for \S+: already member/.exec(line);
        if (again) adds.push({ at: Date.now(), node: again[1]!, jti: null });
      }
    });
  }
  return adds;
}

/** What a line takes from the join API to this process, at most: an add read later than this after its admission ended is a violation. */
const LOG_SLACK_MS = 2_000;

/** No member added without an admission that was active when it was added (the broker's audit log against the join API's). */
async function checkAddsAdmitted(h: ClusterHarness, adds: Add[], record: (v: Violation) => void): Promise<void> {
  const audit = await h.audit();
  const ENDS = new Set(["lease.expired", "ticket.joined", "ticket.abandoned", "admission.revoked"]);
  // Every node that joined as a joiner was added (or found added): a joiner missing here means the check read nothing.
  const joiners = h.nodes.filter((n) => /^joined cluster \S+ as join$/m.test(h.current(n.name)?.stdout ?? "")).map((n) => n.name);
  const unread = joiners.filter((n) => !adds.some((a) => a.node === n));
  if (unread.length) record({ invariant: "adds-have-active-admissions", detail: `no add in the join API's log for joined ${unread.join(", ")}` });
  for (const add of adds) {
    if (add.jti === null) continue;
    const admitted = audit.find((a) => a.action === "ticket.admitted" && a.detail.jti === add.jti);
    if (!admitted || admitted.detail.node !== add.node) {
      record({
        invariant: "adds-have-active-admissions",
        detail: `the join API added a learner for ${add.node} with admission ${add.jti}, which the broker never issued to it`,
        sample: { add, admitted },
      });
      continue;
    }
    const ended = audit.find((a) => ENDS.has(a.action) && a.detail.jti === add.jti && a.action !== "ticket.joined");
    if (ended && Date.parse(ended.time) + LOG_SLACK_MS < add.at) {
      record({
        invariant: "adds-have-active-admissions",
        detail: `the join API added a learner for ${add.node} ${add.at - Date.parse(ended.time)} ms after its admission ${add.jti} ended (${ended.action})`,
        sample: { add, ended },
      });
    }
  }
}

/** The end state: one cluster of started voters, no member left by a node that exited, one bootstrap, and writes accepted. */
async function checkEnd(h: ClusterHarness, nodes: string[], record: (v: Violation) => void): Promise<void> {
  const joined = nodes.filter((n) => h.joined(n));
  if (joined.length === 0) return record({ invariant: "cluster-formed", detail: "no node joined" });
  // Each joined node's own view, until they agree (a member list settles after the last promote).
  let problem = "";
  let sample: unknown;
  const deadline = Date.now() + 60_000;
  do {
    problem = "";
    const lists = await Promise.all(joined.map(async (n) => ({ n, list: await h.etcd(h.node(n).clientURL, 3_000).memberList() })));
    sample = lists.map(({ n, list }) =>
      list.ok ? { node: n, clusterId: hex(list.value.header.clusterId), members: list.value.members } : { node: n, error: list.error.message },
    );
    for (const { n, list } of lists) {
      if (!list.ok) {
        problem = `${n} does not answer: ${list.error.message}`;
        break;
      }
      const peers = list.value.members.map((m) => m.peerURLs[0]).sort();
      const want = joined.map((j) => h.node(j).peerURL).sort();
      if (JSON.stringify(peers) !== JSON.stringify(want)) problem = `${n} lists members ${peers.join(", ")}, not the joined nodes ${want.join(", ")}`;
      else if (list.value.members.some((m) => m.isLearner || !m.started)) problem = `${n} lists a learner or an unstarted member`;
    }
    if (problem) await sleep(1000);
  } while (problem && Date.now() < deadline);
  if (problem) record({ invariant: "voters-only-and-no-member-left-behind", detail: problem, sample });

  const ids = new Set((sample as { clusterId?: string }[]).map((s) => s.clusterId).filter(Boolean));
  if (ids.size > 1) record({ invariant: "one-cluster-id", detail: `the joined nodes serve ${[...ids].join(", ")}`, sample });

  const bootstraps = nodes.filter((n) => (h.runs.get(n) ?? []).some((r) => /as bootstrap$/m.test(r.stdout)));
  if (bootstraps.length !== 1) record({ invariant: "one-bootstrap", detail: `agents that bootstrapped: ${bootstraps.join(", ") || "none"}` });
  const audit = await h.audit();
  const audited = audit.filter((a) => a.action === "cluster.bootstrapped");
  if (audited.length !== 1)
    record({ invariant: "one-bootstrap", detail: `${audited.length} cluster.bootstrapped entries in the broker's audit log`, sample: audited });

  const put = await h.etcd(joined.map((n) => h.node(n).clientURL)).put("campaign/write", String(Date.now()));
  if (!put.ok) record({ invariant: "accepts-writes", detail: put.error.message });
}

/** A seed's timeline as its result carries it: the harness's entries, then its member samples. */
export function seedTimeline(h: ClusterHarness): SeedResult["timeline"] {
  return [...h.timeline.entries, ...h.timeline.members.map((m) => ({ t: m.t, kind: "members", detail: { ...m } }))];
}

/** The line a seed ends with: its outcome, how long it took, and how each node ended (after `note`, when given). */
export function seedSummary(result: SeedResult, note?: string): string {
  const ends = Object.entries(result.ends)
    .map(([n, e]) => `${n} ${e}`)
    .join(", ");
  return `seed ${result.seed}: ${result.outcome} in ${Math.round(result.durationMs / 1000)} s (${note === undefined ? "" : `${note}; `}${ends})`;
}
