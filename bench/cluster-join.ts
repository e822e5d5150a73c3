/**
 * (5) Whole-cluster join: 1 + N controllers on real etcd through the broker, the node agent
 * (`join-broker join --etcd-bin …`, one process per node, each starting its own etcd) and the
 * reference join API (`join-broker controller`), all agents started at the same moment; the
 * time runs from that start until the last agent prints `joined cluster … as …`. Beside it, in
 * the same run, the serial baseline (serial-join.ts) on the same etcd binary and flags, timed
 * from its start until it prints `all voters`. Both are separate processes started by this one
 * and timed on this process's clock. The broker and the join API are already running when the
 * clock starts, as they would be in a real control plane; order alternates from run to run.
 *
 * Every size runs on every etcd version asked for (each version's binary from scripts/etcd.mjs)
 * with the policy's maxInFlight 1, and on 3.6+ also pipelined: maxInFlight M, so the agents start
 * etcd with --max-learners M and several nodes are learners at once.
 *
 * Both sides run etcd as production does (unless `tls` is off): TLS and client-certificate auth on
 * the client and peer ports, one operator CA per run. The brokered nodes find it in their
 * --pki-dir (the bootstrap node signs its own certificates, the join API signs the joiners'); the
 * serial script signs each node's certificates itself, as an operator with the CA at hand would.
 * @module
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { catchUpFacts } from "../src/node/etcd/etcd-log.ts";
import { certificateAuthority } from "../src/node/pki/pki-dir.ts";
import { ClusterHarness, type AgentEvent, type AgentRun } from "../test/support/cluster.ts";
import type { BrokerProcess } from "../test/support/stack.ts";
import { ROOT, scratchDir } from "./support/paths.ts";
import { freePorts } from "../scripts/ports.mjs";
import { log, median, round } from "./support/stats.ts";

const SERIAL = join(ROOT, "bench/serial-join.ts");
const TIMEOUT_MS = 240_000;

export interface JoinRun {
  /** etcd minor version (both sides run the same binary). Absent in results from before versions were measured: Debian's 3.4. */
  etcd?: string;
  /** The broker's policy for the brokered side; 1 unless pipelined (etcd gets --max-learners of the same). */
  maxInFlight?: number;
  /** etcd on TLS with client certificates (both sides). Absent in results from before TLS was measured: plain http. */
  tls?: boolean;
  n: number;
  run: number;
  order: string;
  brokeredSeconds: number;
  serialSeconds: number;
  ratio: number;
  brokered: { voters: number; members: number; clusterIds: number; bootstraps: number; etcd?: EtcdFacts };
  serial: { voters: number; members: number; addRetries: number; promoteRetries: number; etcd?: EtcdFacts };
  brokeredBreakdown: BrokeredBreakdown;
  serialBreakdown: SerialBreakdown;
}

/** Where the brokered run's time went, from the agents' own progress events (sums over the joining nodes). */
export interface BrokeredBreakdown {
  /** Median, over the agents, of spawn to first progress event: Node and TypeScript start-up. */
  processStartMs: number;
  /** Start to the bootstrap node's `joined` (its etcd healthy, the broker told). */
  bootstrapMs: number;
  /** Previous node's `complete` to this node's `admitted`: the broker's hand-off as the agents see it. */
  handoffMs: number;
  /** `member-add` to `member-added`: the join API's answer, with the Retry-After waits while etcd refuses. */
  memberAddMs: number;
  /** How many of those answers were 503 "not now". */
  memberAddRetries: number;
  /** `etcd-start` to `etcd-ready` (serving as a learner). */
  etcdStartMs: number;
  /** `promote` to `promoted` (a voter, as its own etcd says). */
  promoteMs: number;
  /** `complete` to `joined`: reporting to the broker. */
  completeMs: number;
  /** The slowest joiner's catch-up: its `etcd-start` to `promoted` (a voter). */
  slowestCatchUpMs?: number;
}

/** Where the serial script's time went (sums over the joining nodes). */
export interface SerialBreakdown {
  /** Spawn to the script's own clock starting: Node and TypeScript start-up. */
  processStartMs: number;
  /** Node 0: a new cluster, healthy (with its certificates signed, on TLS). */
  firstNodeMs: number;
  /** Signing the joiners' certificates (TLS runs; the brokered agents make keys and requests, and the join API signs, inside their member add). */
  certificatesMs?: number;
  /** `member add --learner`, with its retries while etcd refuses. */
  memberAddMs: number;
  etcdStartMs: number;
  /** Promote (with retries) and until the node calls itself a voter. */
  promoteMs: number;
}

interface SerialStep {
  node: string;
  /** Signing the node's certificates (TLS runs). */
  certMs?: number;
  addRetries: number;
  promoteRetries: number;
  addMs: number;
  startMs: number;
  promoteMs: number;
  voterMs: number;
  totalMs: number;
}

/**
 * What etcd itself says about a side's join, read after it (counts, which load does not move):
 * the raft log's length, and from the members' logs the snapshots they were sent and the
 * publish proposals that timed out. On etcd 3.6+ a member joining a log past 100 entries is sent
 * a snapshot, and if its own publish is already inside it, it waits out etcd's request timeout.
 */
export interface EtcdFacts {
  /** The leader's raft index at the end (every entry: membership changes, publishes, elections, writes). */
  raftIndex: number;
  /** Members whose logs were read. */
  members: number;
  snapshotsReceived: number;
  failedPublishes: number;
  /** The slowest member's start → published itself (ms). */
  slowestPublishMs: number | null;
}

/** The members' logs summed up; a file that does not exist is skipped. */
function etcdFacts(raftIndex: number, logFiles: readonly string[]): EtcdFacts {
  const facts = logFiles.filter((f) => existsSync(f)).map((f) => catchUpFacts(readFileSync(f, "utf8")));
  const publishes = facts.map((f) => f.publishMs).filter((x): x is number => x !== null);
  return {
    raftIndex,
    members: facts.length,
    snapshotsReceived: sum(facts.map((f) => f.snapshotsReceived)),
    failedPublishes: sum(facts.map((f) => f.failedPublishes)),
    slowestPublishMs: publishes.length ? Math.max(...publishes) : null,
  };
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** Reads the agents' progress events (one list per agent). */
function brokeredBreakdown(startedWall: number, progress: AgentEvent[][]): BrokeredBreakdown {
  const agents = progress.map((list) => {
    const events = list.map((e) => ({ step: e.step, at: Date.parse(e.time), msg: e.msg }));
    const at = (step: string, from = 0) => events.find((e) => e.step === step && e.at >= from)?.at ?? NaN;
    return { events, at };
  });
  const boot = agents.find((a) => a.events.some((e) => e.step === "bootstrap"));
  const joiners = agents.filter((a) => a !== boot).sort((x, y) => x.at("admitted") - y.at("admitted"));
  let previousComplete = boot?.at("complete") ?? NaN;
  const out: BrokeredBreakdown = {
    processStartMs: median(agents.map((a) => (a.events[0]?.at ?? NaN) - startedWall)),
    bootstrapMs: (boot?.at("joined") ?? NaN) - startedWall,
    handoffMs: 0,
    memberAddMs: 0,
    memberAddRetries: 0,
    etcdStartMs: 0,
    promoteMs: 0,
    completeMs: 0,
    slowestCatchUpMs: 0,
  };
  for (const a of joiners) {
    const admitted = a.at("admitted");
    const add = a.at("member-add", admitted);
    const added = a.at("member-added", add);
    const etcdStart = a.at("etcd-start", added);
    out.handoffMs += admitted - previousComplete;
    out.memberAddMs += added - add;
    out.memberAddRetries += a.events.filter((e) => e.step === "retry" && e.at >= add && e.at <= added).length;
    out.etcdStartMs += a.at("etcd-ready", etcdStart) - etcdStart;
    out.promoteMs += a.at("promoted", added) - a.at("promote", added);
    out.completeMs += a.at("joined", added) - a.at("complete", added);
    out.slowestCatchUpMs = Math.max(out.slowestCatchUpMs!, a.at("promoted", added) - etcdStart);
    previousComplete = a.at("complete", added);
  }
  for (const key of Object.keys(out) as (keyof BrokeredBreakdown)[]) out[key] = Math.round(out[key]!);
  return out;
}

export interface JoinSummary {
  etcd?: string;
  /** The exact etcd release of that version. */
  release?: string;
  maxInFlight?: number;
  /** As JoinRun's. */
  tls?: boolean;
  n: number;
  brokeredSeconds: number;
  serialSeconds: number;
  ratio: number;
  /** Pipelined only: node 0 ready + one 5 s health window + the slowest joiner's catch-up (median). */
  floorSeconds?: number;
}

export interface JoinResult {
  /** etcd versions measured, with their releases. */
  versions?: { minor: string; release: string }[];
  sizes: number[];
  runsPerSize: number;
  runs: JoinRun[];
  summary: JoinSummary[];
  /**
   * Rows these figures replaced (`--merge`) that were measured on the other transport (plain http
   * against TLS, or the reverse), kept beside them to show what TLS costs.
   */
  otherTransport?: { date: string; loadAverage?: { start: number[]; end: number[] }; summary: JoinSummary[] };
}

/** What `clusterJoin` measures: every size on every version with maxInFlight 1, plus pipelined sizes where etcd allows several learners. */
export interface JoinSettings {
  versions: string[];
  sizes: number[];
  runs: number;
  /** More runs for some sizes (1 + 2 is the shortest join: a run's noise weighs most there). */
  runsBySize?: Record<number, number>;
  /** etcd on TLS with client certificates on both sides (the default); false: plain http. */
  tls?: boolean;
  pipelined: { versions: string[]; sizes: number[]; maxInFlight: number };
}

/** etcd's health window: the leader must have been connected to the voters this long before a membership change. */
export const HEALTH_WINDOW_MS = 5_000;

interface NodeAddress {
  name: string;
  peerURL: string;
  clientURL: string;
}

async function addresses(count: number, tls: boolean): Promise<NodeAddress[]> {
  const ports = await freePorts(count * 2);
  const scheme = tls ? "https" : "http";
  return Array.from({ length: count }, (_, i) => ({
    name: `ctrl-${i}`,
    peerURL: `${scheme}://127.0.0.1:${ports[2 * i]}`,
    clientURL: `${scheme}://127.0.0.1:${ports[2 * i + 1]}`,
  }));
}

/** An operator's etcd CA for one run (made before the clock starts), in `dir`/pki-ca. */
async function operatorCa(dir: string): Promise<string> {
  const caDir = join(dir, "pki-ca");
  await certificateAuthority(caDir, { create: { commonName: "bench etcd CA" } });
  return caDir;
}

/** Every process group this module started and has not yet stopped, and every stack, for `killJoinProcesses`. */
const live = new Set<ChildProcess>();
const stacks = new Set<ClusterHarness>();

/** Spawns in a process group of its own (so its etcd children can be stopped with it), and tracks it. */
function spawnTracked(command: string, args: string[], options: { env?: NodeJS.ProcessEnv } = {}): ChildProcess {
  const proc = spawn(command, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], detached: true, env: { ...process.env, NO_COLOR: "1", ...options.env } });
  live.add(proc);
  proc.once("exit", () => live.delete(proc));
  return proc;
}

/** SIGKILL to every process group still running, and every stack's processes stopped (on an interrupted run). */
export async function killJoinProcesses(): Promise<void> {
  for (const proc of live) killGroup(proc, "SIGKILL");
  await Promise.all([...stacks].map((h) => h.cleanup()));
}

function killGroup(proc: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (proc.pid) process.kill(-proc.pid, signal);
  } catch {
    /* already gone */
  }
}

function exited(proc: ChildProcess): Promise<void> {
  return proc.exitCode !== null || proc.signalCode !== null ? Promise.resolve() : new Promise((r) => proc.once("exit", () => r()));
}

/**
 * Stops processes (SIGTERM to each, SIGKILL to its whole group after a grace period), then any
 * process still running on a data dir under `dir` (an etcd whose agent died first).
 */
async function stopAll(procs: ChildProcess[], dir: string, graceMs = 5_000): Promise<void> {
  for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill("SIGTERM");
  await Promise.race([Promise.all(procs.map(exited)), new Promise((r) => setTimeout(r, graceMs))]);
  for (const p of procs) killGroup(p, "SIGKILL");
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(`--data-dir=${dir}/`)) process.kill(Number(entry), "SIGKILL");
    } catch {
      /* gone, or not ours to read */
    }
  }
}

interface Watched {
  stdout: string;
  /** stderr, line by line (the agents' JSON progress events), the last 2,000 lines. */
  stderr: string[];
}

/** Collects a process's output. */
function watch(proc: ChildProcess): Watched {
  const out: Watched = { stdout: "", stderr: [] };
  let pending = "";
  proc.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    out.stdout += chunk;
  });
  proc.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
    pending += chunk;
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    out.stderr.push(...lines);
    if (out.stderr.length > 2_000) out.stderr.splice(0, out.stderr.length - 2_000);
  });
  return out;
}

/** Resolves with the time (performance.now) at which `proc`'s stdout first matches `pattern`. */
function whenPrinted(proc: ChildProcess, output: Watched, pattern: RegExp, what: string): Promise<number> {
  const tail = () => `${output.stdout.slice(-1000)}\n${output.stderr.slice(-15).join("\n")}`;
  return new Promise((ok, fail) => {
    if (pattern.test(output.stdout)) return ok(performance.now());
    const timer = setTimeout(() => fail(new Error(`${what}: nothing matching ${pattern} within ${TIMEOUT_MS / 1000} s\n${tail()}`)), TIMEOUT_MS);
    const onData = () => {
      if (!pattern.test(output.stdout)) return;
      clearTimeout(timer);
      proc.stdout!.off("data", onData);
      ok(performance.now());
    };
    proc.stdout!.on("data", onData);
    proc.once("exit", (code, signal) => {
      clearTimeout(timer);
      if (!pattern.test(output.stdout)) fail(new Error(`${what} exited (${code ?? signal}) before printing ${pattern}\n${tail()}`));
    });
  });
}

/**
 * With BENCH_JOIN_TRACE=DIR: one file per brokered run, every agent's progress events as
 * milliseconds since the run's start, to see where a run's time went.
 */
function writeTrace(dir: string, cluster: string, startedWall: number, nodes: { name: string }[], progress: AgentEvent[][], joinApiLines: string[]): void {
  const lines: string[] = [];
  for (const line of joinApiLines) {
    try {
      const e = JSON.parse(line) as { time?: unknown; msg?: unknown };
      if (typeof e.time === "string") lines.push(`${String(Date.parse(e.time) - startedWall).padStart(6)} join-api ${String(e.msg ?? "")}`);
    } catch {
      /* not a log line */
    }
  }
  progress.forEach((events, i) => {
    for (const e of events) lines.push(`${String(Date.parse(e.time) - startedWall).padStart(6)} ${nodes[i]!.name} ${e.step}: ${e.msg}`);
  });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${cluster}.txt`), `${lines.sort((a, b) => parseInt(a, 10) - parseInt(b, 10)).join("\n")}\n`);
}

async function brokered(
  broker: BrokerProcess,
  etcdBin: string,
  n: number,
  run: number,
  tag: string,
  maxInFlight: number,
  tls: boolean,
): Promise<{ seconds: number; check: JoinRun["brokered"]; breakdown: BrokeredBreakdown }> {
  const cluster = `join-${tag}-m${maxInFlight}-n${n}-r${run}${tls ? "" : "-http"}`;
  // The stack as the tests start it: the operator's CA in every node's --pki-dir (whichever node
  // bootstraps signs its own) and the join API's, the join API, one agent per node (their flags:
  // test/support/stack.ts); the broker is the shared one. The agents read maxInFlight from their
  // admitted tickets and start etcd with as many learner slots.
  const h = await ClusterHarness.start({
    scenario: cluster,
    seed: run,
    cluster,
    nodes: Array.from({ length: n + 1 }, (_, i) => `ctrl-${i}`),
    etcdBin,
    etcdTls: tls,
    sharedBroker: broker,
    ...(maxInFlight !== 1 ? { policy: { maxInFlight } } : {}),
    joinApiArgs: ["--log-format", "json"],
    parentDir: scratchDir(),
    keepDir: !!process.env.BENCH_KEEP,
  });
  stacks.add(h);
  try {
    const started = performance.now();
    const startedWall = Date.now();
    const agents = h.nodes.map((node) => {
      const agent = h.startAgent(node.name);
      return { agent, joined: whenJoined(agent) };
    });
    const times = await Promise.all(agents.map((a) => a.joined));
    const seconds = (Math.max(...times) - started) / 1000;

    const check: JoinRun["brokered"] = {
      voters: 0,
      members: 0,
      clusterIds: 0,
      bootstraps: agents.filter((a) => /as bootstrap$/m.test(a.agent.stdout)).length,
    };
    const ids = new Set<string>();
    let raftIndex = 0;
    for (const node of h.nodes) {
      const gateway = h.etcd(node.clientURL);
      const list = await gateway.memberList();
      if (!list.ok) continue;
      ids.add(list.value.header.clusterId);
      check.members = Math.max(check.members, list.value.members.length);
      check.voters = Math.max(check.voters, list.value.members.filter((m) => !m.isLearner && m.started).length);
      const status = await gateway.status();
      if (status.ok) raftIndex = Math.max(raftIndex, Number(status.value.raftIndex));
    }
    check.clusterIds = ids.size;
    check.etcd = etcdFacts(
      raftIndex,
      h.nodes.map((node) => join(node.stateDir, "etcd.log")),
    );
    const events = agents.map((a) => a.agent.events);
    if (process.env.BENCH_JOIN_TRACE) writeTrace(process.env.BENCH_JOIN_TRACE, cluster, startedWall, h.nodes, events, h.joinApi.output().split("\n"));
    return { seconds, check, breakdown: brokeredBreakdown(startedWall, events) };
  } finally {
    stacks.delete(h);
    await h.cleanup();
  }
}

/** Resolves with the time (performance.now) at which the agent prints `joined cluster … as …`. */
function whenJoined(agent: AgentRun): Promise<number> {
  const joined = /^joined cluster \S+ as (bootstrap|join)$/m;
  const tail = () => `${agent.stdout.slice(-1000)}\n${agent.otherOutput.slice(-15).join("\n")}`;
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`agent ${agent.node.name}: not joined within ${TIMEOUT_MS / 1000} s\n${tail()}`)), TIMEOUT_MS);
    // The harness reads stdout first (its listener is older): agent.stdout holds this chunk already.
    const onData = () => {
      if (!joined.test(agent.stdout)) return;
      clearTimeout(timer);
      agent.proc.stdout!.off("data", onData);
      ok(performance.now());
    };
    agent.proc.stdout!.on("data", onData);
    void agent.exited.then((x) => {
      clearTimeout(timer);
      if (!joined.test(agent.stdout)) fail(new Error(`agent ${agent.node.name} exited (${x.code ?? x.signal}) before it joined\n${tail()}`));
    });
  });
}

async function serial(
  etcdBin: string,
  n: number,
  run: number,
  tls: boolean,
): Promise<{ seconds: number; check: JoinRun["serial"]; breakdown: SerialBreakdown }> {
  const dir = mkdtempSync(join(scratchDir(), `serial-${n}-${run}-`));
  const nodes = await addresses(n + 1, tls);
  const caDir = tls ? await operatorCa(dir) : null;
  const started = performance.now();
  const proc = spawnTracked(process.execPath, ["--import", "tsx", SERIAL, etcdBin, dir, JSON.stringify(nodes), ...(caDir ? [caDir] : [])]);
  try {
    const output = watch(proc);
    const done = await whenPrinted(proc, output, /^all voters \d+$/m, "serial script");
    await exited(proc);
    const details = JSON.parse(/^\{.*\}$/m.exec(output.stdout)?.[0] ?? "{}") as { members?: number; voters?: number; raftIndex?: number; steps?: SerialStep[] };
    const steps = details.steps ?? [];
    const inside = Number(/^all voters (\d+)$/m.exec(output.stdout)?.[1] ?? NaN);
    const joins = steps.slice(1);
    return {
      seconds: (done - started) / 1000,
      breakdown: {
        processStartMs: Math.round(done - started - inside),
        firstNodeMs: steps[0]?.totalMs ?? NaN,
        certificatesMs: sum(joins.map((x) => x.certMs ?? 0)),
        memberAddMs: sum(joins.map((x) => x.addMs)),
        etcdStartMs: sum(joins.map((x) => x.startMs)),
        promoteMs: sum(joins.map((x) => x.promoteMs + x.voterMs)),
      },
      check: {
        voters: details.voters ?? 0,
        members: details.members ?? 0,
        addRetries: steps.reduce((s, x) => s + x.addRetries, 0),
        promoteRetries: steps.reduce((s, x) => s + x.promoteRetries, 0),
        etcd: etcdFacts(
          details.raftIndex ?? NaN,
          nodes.map((node) => join(dir, `${node.name}.log`)),
        ),
      },
    };
  } finally {
    await stopAll([proc], dir);
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function clusterJoin(
  broker: BrokerProcess,
  settings: JoinSettings,
  etcdPath: (version: string) => Promise<{ bin: string; release: string }>,
): Promise<JoinResult> {
  const runs: JoinRun[] = [];
  const tls = settings.tls !== false;
  const versions: { minor: string; release: string }[] = [];
  const plans: { etcd: string; maxInFlight: number; sizes: number[] }[] = [];
  for (const etcd of settings.versions) {
    plans.push({ etcd, maxInFlight: 1, sizes: settings.sizes });
    if (settings.pipelined.versions.includes(etcd)) plans.push({ etcd, maxInFlight: settings.pipelined.maxInFlight, sizes: settings.pipelined.sizes });
  }
  const bins = new Map<string, string>();
  for (const plan of plans) {
    if (!bins.has(plan.etcd)) {
      const { bin, release } = await etcdPath(plan.etcd);
      bins.set(plan.etcd, bin);
      versions.push({ minor: plan.etcd, release });
    }
    const etcdBin = bins.get(plan.etcd)!;
    const tag = `v${plan.etcd.replace(".", "")}`;
    for (const n of plan.sizes) {
      const times = settings.runsBySize?.[n] ?? settings.runs;
      for (let run = 0; run < times; run++) {
        const brokeredFirst = run % 2 === 0;
        let b: Awaited<ReturnType<typeof brokered>>;
        let s: Awaited<ReturnType<typeof serial>>;
        if (brokeredFirst) {
          b = await brokered(broker, etcdBin, n, run, tag, plan.maxInFlight, tls);
          s = await serial(etcdBin, n, run, tls);
        } else {
          s = await serial(etcdBin, n, run, tls);
          b = await brokered(broker, etcdBin, n, run, tag, plan.maxInFlight, tls);
        }
        const ratio = round(b.seconds / s.seconds, 3);
        runs.push({
          etcd: plan.etcd,
          maxInFlight: plan.maxInFlight,
          tls,
          n,
          run,
          order: brokeredFirst ? "brokered then serial" : "serial then brokered",
          brokeredSeconds: round(b.seconds, 2),
          serialSeconds: round(s.seconds, 2),
          ratio,
          brokered: b.check,
          serial: s.check,
          brokeredBreakdown: b.breakdown,
          serialBreakdown: s.breakdown,
        });
        const facts = (f?: EtcdFacts) =>
          f ? `raft index ${f.raftIndex}, ${f.snapshotsReceived} snapshot(s) sent, ${f.failedPublishes} publish timeout(s)` : "no etcd facts";
        log(
          `join etcd ${plan.etcd}${tls ? " (TLS)" : " (plain http)"}, maxInFlight ${plan.maxInFlight}, 1+${n} run ${run + 1}/${times}: brokered ${round(b.seconds, 1)} s (${facts(b.check.etcd)}), serial ${round(s.seconds, 1)} s (${facts(s.check.etcd)}), ratio ${ratio}`,
        );
      }
    }
  }
  const summary: JoinSummary[] = [];
  for (const plan of plans) {
    for (const n of plan.sizes) {
      const mine = runs.filter((r) => r.etcd === plan.etcd && r.maxInFlight === plan.maxInFlight && r.n === n);
      const floors = mine.map((r) => (r.brokeredBreakdown.bootstrapMs + HEALTH_WINDOW_MS + (r.brokeredBreakdown.slowestCatchUpMs ?? NaN)) / 1000);
      summary.push({
        etcd: plan.etcd,
        release: versions.find((v) => v.minor === plan.etcd)?.release,
        maxInFlight: plan.maxInFlight,
        tls,
        n,
        brokeredSeconds: round(median(mine.map((r) => r.brokeredSeconds)), 2),
        serialSeconds: round(median(mine.map((r) => r.serialSeconds)), 2),
        ratio: round(median(mine.map((r) => r.ratio)), 3),
        ...(plan.maxInFlight > 1 ? { floorSeconds: round(median(floors), 2) } : {}),
      });
    }
  }
  return { versions, sizes: [...new Set(plans.flatMap((p) => p.sizes))].sort((a, b) => a - b), runsPerSize: settings.runs, runs, summary };
}

/** One etcd cluster of 1 + N voters on both sides, and exactly one bootstrap among the agents. */
export function joinChecksPassed(r: JoinRun): boolean {
  const size = r.n + 1;
  return (
    r.brokered.clusterIds === 1 &&
    r.brokered.bootstraps === 1 &&
    r.brokered.members === size &&
    r.brokered.voters === size &&
    r.serial.members === size &&
    r.serial.voters === size
  );
}
