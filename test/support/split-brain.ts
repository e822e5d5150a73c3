/**
 * The failure the broker prevents, reproduced on real etcd, next to the brokered run on the same
 * seeded fault schedule.
 *
 * `runNaive` starts 1 + N controllers that join the way k0s v1.28 did (k0s issue #5149): the
 * first creates the cluster; each joiner writes its certificates, then asks a naive join API,
 * which adds it as a *voter* at once and answers 500 on any error; the joiner retries for about
 * ten seconds, then exits; its supervisor restarts it, and the restarted controller, seeing its
 * certificates, assumes it has joined and starts etcd on its own — a new cluster when it has no
 * etcd data yet. `runBrokered` runs the project's own stack (broker, reference join API, node
 * agents) through `ClusterHarness`. Both are measured by the same sampler: every cluster ID any
 * node served, how often the first cluster had no leader, and where each node ended.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EtcdGateway, initialClusterEntries, type EtcdMember } from "../../src/node/etcd/gateway.ts";
import { startEtcd, type EtcdProcess } from "../../src/node/etcd/etcd-process.ts";
import { ClusterHarness, hex } from "./cluster.ts";
import { TEST_TIMING, etcdBinary, freePorts } from "./etcd.ts";
import { startFaultProxy, type FaultProxy } from "./fault-proxy.ts";
import { between, pick, seededRandom } from "./seeded.ts";

/** Where a kill lands, in the brokered agent's steps; the naive run maps them to its own moments. */
export type KillStep = "queued" | "admitted" | "member-added" | "etcd-start" | "promote";

export interface FaultSchedule {
  seed: number;
  /** The join API fails (500 or a dropped connection) for this long from the start. */
  joinApiFailMs: number;
  /** Share of those failures that drop the connection instead of answering 500. */
  dropShare: number;
  /** Two joiners killed (with their etcd) at a step of their first run, restarted after a pause. */
  kills: { node: string; step: KillStep; restartAfterMs: number }[];
}

/** The seeded fault schedule both runs share (and `npm run demo -- --faults` uses). */
export function faultSchedule(seed: number, names: readonly string[]): FaultSchedule {
  const random = seededRandom(seed);
  const joiners = [...names.slice(1)];
  // A seeded Fisher-Yates shuffle: which two joiners die.
  for (let i = joiners.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [joiners[i], joiners[j]] = [joiners[j]!, joiners[i]!];
  }
  const kills = joiners.slice(0, 2).map((node) => ({
    node,
    step: pick(random, ["queued", "admitted", "member-added", "etcd-start", "promote"] as const),
    restartAfterMs: between(random, 300, 1200),
  }));
  return { seed, joinApiFailMs: 8_000, dropShare: 0.5, kills };
}

/** What a run did, measured the same way for both. */
export interface RunFigures {
  mode: "naive" | "brokered";
  /** Every cluster ID any node served during the run, in the order first seen (hex). */
  clusterIds: string[];
  /** Times the first cluster went without a leader for at least 2 s (no quorum). */
  quorumLosses: number;
  /** Seconds the first cluster spent without a leader after it first had one. */
  secondsWithoutQuorum: number;
  /** Whether the first cluster had a leader at the end. */
  quorumAtEnd: boolean;
  /** Per node at the end: the cluster it served (hex), or null when its etcd did not answer. */
  finalCluster: Record<string, string | null>;
  /** Nodes that ended serving a cluster other than the first. */
  inOtherCluster: string[];
  /** Nodes whose etcd did not answer at the end. */
  notServing: string[];
  /** The first cluster's members at the end (from a member that answered), or null. */
  members: { total: number; voters: number; learners: number; unstarted: number } | null;
  /** Restarts of a node (its supervisor's or the fault schedule's). */
  restarts: number;
  /** Join API calls refused (any non-200 answer or no answer). */
  joinFailures: number;
  tookMs: number;
  /** One line per notable moment. */
  events: string[];
}

export interface NodeAddress {
  name: string;
  peerURL: string;
  clientURL: string;
}

/**
 * Samples every node's etcd every 500 ms: which cluster it serves and whether it has a leader.
 * The first cluster is the first ID seen; a quorum loss is two seconds or more in which no
 * member of that cluster reports a leader.
 */
class Sampler {
  readonly clusterIds: string[] = [];
  readonly finalCluster: Record<string, string | null> = {};
  quorumLosses = 0;
  secondsWithoutQuorum = 0;
  #noLeaderSince: number | null = null;
  #counted = false;
  #hadLeader = false;
  #lastLeader = true;
  #timer: NodeJS.Timeout | null = null;
  #busy = false;

  constructor(
    readonly nodes: readonly NodeAddress[],
    readonly note: (line: string) => void,
  ) {}

  start(): void {
    this.#timer = setInterval(() => {
      if (this.#busy) return;
      this.#busy = true;
      void this.sample().finally(() => (this.#busy = false));
    }, 500);
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    while (this.#busy) await new Promise((r) => setTimeout(r, 50));
    // The final view decides "not serving": give each node a busy machine's time to answer.
    await this.sample(5_000);
    this.#close(Date.now());
  }

  async sample(timeoutMs = 400): Promise<void> {
    const now = Date.now();
    const views = await Promise.all(
      this.nodes.map(async (n) => {
        const s = await new EtcdGateway(n.clientURL, { timeoutMs }).status(n.clientURL);
        return s.ok ? { node: n.name, cluster: hex(s.value.header.clusterId), leader: s.value.leader !== "" } : { node: n.name, cluster: null, leader: false };
      }),
    );
    for (const v of views) {
      this.finalCluster[v.node] = v.cluster;
      if (v.cluster && !this.clusterIds.includes(v.cluster)) {
        this.clusterIds.push(v.cluster);
        if (this.clusterIds.length > 1) this.note(`${v.node} serves cluster ${v.cluster}: cluster #${this.clusterIds.length}`);
      }
    }
    const first = this.clusterIds[0];
    if (!first) return;
    const leader = views.some((v) => v.cluster === first && v.leader);
    if (leader) {
      this.#hadLeader = true;
      this.#close(now);
    } else if (this.#hadLeader && this.#noLeaderSince === null) {
      this.#noLeaderSince = now;
      this.#counted = false;
    }
    if (this.#noLeaderSince !== null && !this.#counted && now - this.#noLeaderSince >= 2_000) {
      this.#counted = true;
      this.quorumLosses++;
      this.note(`cluster ${first} has no leader (quorum lost)`);
    }
    this.#lastLeader = leader;
  }

  get quorumAtEnd(): boolean {
    return this.#lastLeader;
  }

  #close(now: number): void {
    if (this.#noLeaderSince === null) return;
    const lasted = now - this.#noLeaderSince;
    if (lasted >= 2_000) this.secondsWithoutQuorum += lasted / 1000;
    this.#noLeaderSince = null;
  }
}

async function membersOf(
  nodes: readonly NodeAddress[],
  cluster: string | undefined,
  finalCluster: Record<string, string | null>,
): Promise<RunFigures["members"]> {
  if (!cluster) return null;
  for (const n of nodes.filter((x) => finalCluster[x.name] === cluster)) {
    const list = await new EtcdGateway(n.clientURL, { timeoutMs: 3_000 }).memberList();
    if (!list.ok) continue;
    const m = list.value.members;
    return {
      total: m.length,
      voters: m.filter((x) => !x.isLearner).length,
      learners: m.filter((x) => x.isLearner).length,
      unstarted: m.filter((x) => !x.started).length,
    };
  }
  return null;
}

function figures(
  mode: RunFigures["mode"],
  sampler: Sampler,
  members: RunFigures["members"],
  extra: { restarts: number; joinFailures: number; tookMs: number; events: string[] },
): RunFigures {
  const first = sampler.clusterIds[0];
  const names = sampler.nodes.map((n) => n.name);
  return {
    mode,
    clusterIds: [...sampler.clusterIds],
    quorumLosses: sampler.quorumLosses,
    secondsWithoutQuorum: Math.round(sampler.secondsWithoutQuorum * 10) / 10,
    quorumAtEnd: sampler.quorumAtEnd,
    finalCluster: { ...sampler.finalCluster },
    inOtherCluster: names.filter((n) => sampler.finalCluster[n] && sampler.finalCluster[n] !== first),
    notServing: names.filter((n) => !sampler.finalCluster[n]),
    members,
    ...extra,
  };
}

// ------------------------------------------------------------------------------------ naive

/** How long a naive joiner keeps asking before it gives up and exits (k0s: about 10 s). */
const NAIVE_JOIN_BUDGET_MS = 10_000;
/** Its supervisor's restart delay (systemd `RestartSec`; k0s's unit says 10 s, shortened here). */
const NAIVE_RESTART_MS = 2_000;

/**
 * The naive join API: `POST /v1beta1/etcd/members {node, peerAddress}` adds the peer as a voter
 * at once, answers the `--initial-cluster` entries, and 500 on any error.
 */
async function startNaiveJoinApi(endpoints: string[], onRequest: (ok: boolean) => void): Promise<{ url: string; server: Server }> {
  const gateway = new EtcdGateway(endpoints, { timeoutMs: 3_000 });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const fail = (message: string) => {
        onRequest(false);
        res.writeHead(500, { "content-type": "text/plain" });
        res.end(`${message}\n`);
      };
      try {
        const { node, peerAddress } = JSON.parse(Buffer.concat(chunks).toString()) as { node: string; peerAddress: string };
        const added = await gateway.memberAdd([peerAddress], { learner: false });
        if (!added.ok) return fail(added.error.message);
        const initialCluster = initialClusterEntries(added.value.members, (m: EtcdMember) =>
          m.id === added.value.member.id ? node : `unstarted-${hex(m.id)}`,
        );
        onRequest(true);
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ memberID: added.value.member.id, initialCluster }));
      } catch (e) {
        fail(e instanceof Error ? e.message : String(e));
      }
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

interface NaiveNode extends NodeAddress {
  dir: string;
  dataDir: string;
  certs: string;
  etcd: EtcdProcess | null;
  /** Bumped on every (re)start; a run whose generation is stale stops at its next step. */
  generation: number;
  runs: number;
  done: boolean;
}

export interface RunOptions {
  seed: number;
  /** Node names; the first is the one that creates the cluster (naive) and a joiner like any other (brokered). */
  names: string[];
  /** Apply the fault schedule (otherwise only the join races). */
  faults: boolean;
  /** Progress lines. */
  log?: (line: string) => void;
  /** Stop after this long even if nodes are still restarting; default 120 s (naive), 600 s (brokered). */
  timeoutMs?: number;
}

/** A run's event lines, each stamped with the seconds since the run began, kept and passed on to `log`. */
function eventLog(log: RunOptions["log"]): { t0: number; events: string[]; note: (line: string) => void } {
  const t0 = Date.now();
  const events: string[] = [];
  const note = (line: string) => {
    const text = `[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)} s] ${line}`;
    events.push(text);
    log?.(text);
  };
  return { t0, events, note };
}

/** The naive run: k0s v1.28's join logic against a join API that adds voters at once. */
export async function runNaive(options: RunOptions): Promise<RunFigures> {
  const { t0, events, note } = eventLog(options.log);
  const schedule = faultSchedule(options.seed, options.names);
  const bin = await etcdBinary();
  const root = mkdtempSync(join(tmpdir(), "join-broker-naive-"));
  const ports = await freePorts(options.names.length * 2);
  const nodes: NaiveNode[] = options.names.map((name, i) => ({
    name,
    peerURL: `http://127.0.0.1:${ports[2 * i]}`,
    clientURL: `http://127.0.0.1:${ports[2 * i + 1]}`,
    dir: join(root, name),
    dataDir: join(root, name, "etcd"),
    certs: join(root, name, "pki", "ca.crt"),
    etcd: null,
    generation: 0,
    runs: 0,
    done: false,
  }));
  let joinFailures = 0;
  let restarts = 0;
  let stopping = false;
  const api = await startNaiveJoinApi(
    nodes.map((n) => n.clientURL),
    (ok) => void (ok ? undefined : joinFailures++),
  );
  const proxy: FaultProxy = await startFaultProxy(api.url, seededRandom(options.seed ^ 0x5eed));
  const sampler = new Sampler(nodes, note);
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const killAt = new Map(options.faults ? schedule.kills.map((k) => [k.node, k] as const) : []);

  /** Crash: the controller and its etcd die together; the supervisor restarts it after `afterMs`. */
  const crash = (n: NaiveNode, why: string, afterMs: number) => {
    n.generation++;
    if (n.etcd?.running()) process.kill(n.etcd.pid, "SIGKILL");
    n.etcd = null;
    note(`${n.name} ${why}; restarting in ${(afterMs / 1000).toFixed(1)} s`);
    setTimeout(() => {
      if (stopping) return;
      restarts++;
      void run(n);
    }, afterMs);
  };
  /** Applies the fault schedule: a kill planned at this step of the node's first run. */
  const faultAt = (n: NaiveNode, steps: KillStep[]): boolean => {
    const k = killAt.get(n.name);
    if (!k || n.runs !== 1 || !steps.includes(k.step)) return false;
    killAt.delete(n.name);
    crash(n, `killed (fault schedule, at ${k.step})`, k.restartAfterMs);
    return true;
  };

  const startOwnEtcd = async (n: NaiveNode, initialCluster: string[], state: "new" | "existing") => {
    n.etcd = await startEtcd({
      bin,
      name: n.name,
      peerURL: n.peerURL,
      clientURL: n.clientURL,
      dataDir: n.dataDir,
      initialCluster,
      initialClusterState: state,
      initialClusterToken: `naive-${options.seed}-${n.name}`,
      ...TEST_TIMING,
      logFile: join(n.dir, "etcd.log"),
      waitFor: "none",
    });
    // k0s waits for its etcd to serve; one that does not within 30 s fails the controller.
    await n.etcd.waitUntil("serving", 30_000);
  };

  async function run(n: NaiveNode): Promise<void> {
    const generation = ++n.generation;
    n.runs++;
    const alive = () => !stopping && n.generation === generation;
    mkdirSync(join(n.dir, "pki"), { recursive: true });
    try {
      const isFirst = n === nodes[0];
      // k0s's needToJoin: a CA on disk means "already joined"; else an etcd database does.
      const needToJoin = !isFirst && !existsSync(n.certs) && !existsSync(join(n.dataDir, "member", "snap", "db"));
      if (isFirst || !needToJoin) {
        if (!isFirst)
          note(
            `${n.name} (run ${n.runs}) finds its certificates: starts etcd as if already joined${existsSync(join(n.dataDir, "member")) ? " (with its data)" : ", with no data: a new cluster"}`,
          );
        writeFileSync(n.certs, "CA");
        await startOwnEtcd(n, [`${n.name}=${n.peerURL}`], "new");
        if (!alive()) return;
        if (isFirst) note(`${n.name} created the cluster`);
        n.done = true;
        return;
      }
      // Joining: the CA arrives with the join token and is written first (the bug's root).
      writeFileSync(n.certs, "CA");
      if (faultAt(n, ["queued", "admitted"])) return;
      const deadline = Date.now() + NAIVE_JOIN_BUDGET_MS;
      let answer: { initialCluster: string[] } | null = null;
      let last = "";
      while (alive() && Date.now() < deadline) {
        try {
          const res = await fetch(`${proxy.url}/v1beta1/etcd/members`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ node: n.name, peerAddress: n.peerURL }),
            signal: AbortSignal.timeout(5_000),
          });
          if (res.status === 200) {
            answer = (await res.json()) as { initialCluster: string[] };
            break;
          }
          last = `${res.status} ${(await res.text()).trim().slice(0, 80)}`;
        } catch (e) {
          last = e instanceof Error ? e.message : String(e);
        }
        await sleep(1_000);
      }
      if (!alive()) return;
      if (!answer) {
        crash(n, `gave up joining: ${last}`, NAIVE_RESTART_MS);
        return;
      }
      note(`${n.name} was added as a voter`);
      if (faultAt(n, ["member-added"])) return;
      await startOwnEtcd(n, answer.initialCluster, "existing");
      if (!alive()) return;
      if (faultAt(n, ["etcd-start", "promote"])) return;
      note(`${n.name} runs etcd in the cluster`);
      n.done = true;
    } catch (e) {
      if (!alive()) return;
      crash(n, `failed: ${(e instanceof Error ? e.message : String(e)).split("\n")[0]}`, NAIVE_RESTART_MS);
    }
  }

  try {
    note(
      `naive: ${nodes.length} controllers, join API adds voters at once${options.faults ? `, faults: join API fails for ${schedule.joinApiFailMs / 1000} s, kills ${schedule.kills.map((k) => `${k.node} at ${k.step}`).join(", ")}` : ""}`,
    );
    // The first controller creates the cluster before the joiners are started, as an installer would.
    await run(nodes[0]!);
    sampler.start();
    if (options.faults) proxy.failFor(schedule.joinApiFailMs, schedule.dropShare);
    for (const n of nodes.slice(1)) void run(n);
    // Until every controller runs etcd (in some cluster) and nothing changed for 5 s, or the time is up.
    const deadline = t0 + (options.timeoutMs ?? 120_000);
    let settledSince: number | null = null;
    let lastEvents = events.length;
    while (Date.now() < deadline) {
      await sleep(500);
      const settled = nodes.every((n) => n.done) && events.length === lastEvents;
      lastEvents = events.length;
      settledSince = settled ? (settledSince ?? Date.now()) : null;
      if (settledSince && Date.now() - settledSince >= 5_000) break;
    }
    if (Date.now() >= deadline) note(`stopped after ${Math.round((options.timeoutMs ?? 120_000) / 1000)} s`);
    await sampler.stop();
    const tookMs = Date.now() - t0;
    const members = await membersOf(nodes, sampler.clusterIds[0], sampler.finalCluster);
    return figures("naive", sampler, members, { restarts, joinFailures: joinFailures + proxy.stats.answered500 + proxy.stats.dropped, tookMs, events });
  } finally {
    stopping = true;
    for (const n of nodes) {
      n.generation++;
      if (n.etcd?.running()) process.kill(n.etcd.pid, "SIGKILL");
    }
    await proxy.close();
    await new Promise((r) => api.server.close(r));
    api.server.closeAllConnections();
    if (process.env.KEEP_E2E_DIR) console.log(`[naive] kept ${root}`);
    else rmSync(root, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------- brokered

/** The brokered run on the same schedule: broker, reference join API behind the fault proxy, agents. */
export async function runBrokered(options: RunOptions): Promise<RunFigures> {
  const { t0, events, note } = eventLog(options.log);
  const schedule = faultSchedule(options.seed, options.names);
  // Plain http like the run without the broker, so the two differ by the broker alone.
  const h = await ClusterHarness.start({
    scenario: "demo-brokered",
    seed: options.seed,
    nodes: options.names,
    cluster: "demo",
    faultProxy: true,
    random: seededRandom(options.seed ^ 0x5eed),
    etcdTls: false,
  });
  let restarts = 0;
  try {
    note(`brokered: ${options.names.length} node agents, broker and reference join API${options.faults ? `, same faults` : ""}`);
    const sampler = new Sampler(h.nodes, note);
    const kills = options.faults ? schedule.kills.map((k) => ({ ...k, done: false })) : [];
    h.onEvent((run, e) => {
      if (e.step === "joined") note(`${run.node.name} joined`);
      const k = kills.find((x) => !x.done && x.node === run.node.name && run.run === 1 && x.step === e.step);
      if (!k) return;
      k.done = true;
      note(`${k.node} killed (fault schedule, at ${k.step})`);
      void (async () => {
        await h.kill(k.node, "group");
        await new Promise((r) => setTimeout(r, k.restartAfterMs));
        restarts++;
        h.startAgent(k.node);
      })();
    });
    if (options.faults) h.proxy!.failFor(schedule.joinApiFailMs, schedule.dropShare);
    sampler.start();
    for (const n of options.names) h.startAgent(n);
    await h.waitFor("every node to join", () => options.names.every((n) => h.joined(n)), options.timeoutMs ?? 600_000);
    await sampler.stop();
    // A follower applies the last promote a moment after the leader: read the members once settled.
    let members = await membersOf(h.nodes, sampler.clusterIds[0], sampler.finalCluster);
    const settled = () => members?.total === options.names.length && members.learners === 0 && members.unstarted === 0;
    for (const deadline = Date.now() + 30_000; !settled() && Date.now() < deadline; ) {
      await new Promise((r) => setTimeout(r, 250));
      members = await membersOf(h.nodes, sampler.clusterIds[0], sampler.finalCluster);
    }
    const s = h.proxy!.stats;
    return figures("brokered", sampler, members, { restarts, joinFailures: s.answered500 + s.dropped, tookMs: Date.now() - t0, events });
  } finally {
    await h.cleanup();
  }
}

/** The two runs side by side, as the demo prints them (and the README shows). */
export function sideBySide(naive: RunFigures, brokered: RunFigures): string {
  const cell = (text: string) => (text.length > 40 ? `${text.slice(0, 39)}…` : text).padEnd(42);
  const row = (label: string, f: (r: RunFigures) => string) => `  ${label.padEnd(34)}${cell(f(naive))}${f(brokered)}`;
  const first = (r: RunFigures) => r.clusterIds[0] ?? "none";
  return [
    `  ${"".padEnd(34)}${cell("without the broker")}with the broker`,
    row("cluster IDs seen", (r) => `${r.clusterIds.length} (${r.clusterIds.join(", ") || "none"})`),
    row("quorum losses (no leader ≥ 2 s)", (r) => `${r.quorumLosses} (${r.secondsWithoutQuorum} s)${r.quorumAtEnd ? "" : ", no leader at the end"}`),
    row("nodes in another cluster at end", (r) => `${r.inOtherCluster.length}${r.inOtherCluster.length ? ` (${r.inOtherCluster.join(", ")})` : ""}`),
    row("nodes not serving at end", (r) => `${r.notServing.length}${r.notServing.length ? ` (${r.notServing.join(", ")})` : ""}`),
    row("first cluster's members at end", (r) =>
      r.members
        ? `${r.members.total}: ${r.members.voters} voters, ${r.members.learners} learners, ${r.members.unstarted} unstarted`
        : `? (${first(r)} unreachable)`,
    ),
    row("join calls failed (500, dropped)", (r) => String(r.joinFailures)),
    row("restarts", (r) => String(r.restarts)),
    row("time", (r) => `${(r.tookMs / 1000).toFixed(1)} s`),
  ].join("\n");
}
