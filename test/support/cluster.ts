/**
 * A whole control plane on loopback, made of real processes: the broker under `wrangler dev`
 * or `join-broker serve` (persisted Durable Object state, restartable), the reference join API (`join-broker
 * controller`), optionally behind a fault proxy, and one node agent (`join-broker join
 * --etcd-bin …`) per node, each starting its own etcd. The harness reads the agents' JSON
 * progress, can kill and restart them at chosen steps, samples etcd's member list into a
 * timeline, and reads the final membership from every node.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EtcdGateway, type EtcdMember } from "../../src/node/etcd/gateway.ts";
import { tlsFetch, type TlsFiles } from "../../src/node/etcd/tls-fetch.ts";
import type { AuditEntry, BrokerClient } from "../../src/shared/client/index.ts";
import type { Lab } from "../lab/lab.ts";
import {
  BIN,
  ROOT,
  brokerClient,
  enrollCluster,
  joinArgv,
  preparePki,
  startBroker,
  startJoinApiProcess,
  type BrokerProcess,
  type JoinApiProcess,
  type JoinArgs,
  type StackPki,
  type StartBrokerOptions,
} from "./stack.ts";
import { etcdBinary, etcdBinaryFor, freePorts, MULTI_LEARNER_VERSION } from "./etcd.ts";
import { e2eSeed } from "./seeded.ts";
import { startFaultProxy, type FaultProxy } from "./fault-proxy.ts";
import { InvariantViolation, RunInvariants, type NodeSample } from "./invariants.ts";
import { Timeline } from "./timeline.ts";

/** Per etcd version when one is chosen ($E2E_ETCD_VERSION), so that the runs of one `npm test` keep their timelines apart. */
export const RESULTS_DIR = join(ROOT, "test-results", "e2e", ...(process.env.E2E_ETCD_VERSION ? [`etcd-${process.env.E2E_ETCD_VERSION}`] : []));

export interface AgentEvent {
  time: string;
  node: string;
  step: string;
  msg: string;
  [field: string]: unknown;
}

export interface NodeSpec {
  name: string;
  peerURL: string;
  clientURL: string;
  stateDir: string;
  dataDir: string;
  /** Where this test process reaches the node's etcd: `clientURL`, or a forward into the lab. */
  localClientURL: string;
  /** The node's lab host (same name as the node), when the run is in a lab. */
  labHost?: string;
  /** The agent's --pki-dir (TLS runs only). */
  pkiDir: string;
}

export interface AgentRun {
  node: NodeSpec;
  /** 1 for the first start of this node's agent, 2 after one restart, … */
  run: number;
  proc: ChildProcess;
  pid: number;
  events: AgentEvent[];
  /** What the agent printed on stdout (the `joined cluster … as …` line). */
  stdout: string;
  /** stderr lines that were not JSON progress. */
  otherOutput: string[];
  exit: { code: number | null; signal: NodeJS.Signals | null } | null;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface HarnessOptions {
  scenario: string;
  seed: number;
  /** Node names; the agents decide among themselves (through the broker) who bootstraps. */
  nodes: string[];
  cluster?: string;
  /** Put a fault proxy between the agents and the join API. */
  faultProxy?: boolean;
  random?: () => number;
  /** Extra `join-broker join` flags for every agent. */
  agentArgs?: string[];
  /** How the broker runs (`runtime`: wrangler dev or join-broker serve; TLS for serve). */
  broker?: Omit<StartBrokerOptions, "persistDir">;
  /** A broker already running (the benchmarks' shared one): the harness neither starts nor stops it. */
  sharedBroker?: BrokerProcess;
  /** More `join-broker controller` flags (e.g. `--log-format json`). */
  joinApiArgs?: string[];
  /** Where the run's directory is made (default: the system's temp dir). */
  parentDir?: string;
  /** Keep the run's directory (etcd logs and flags) after cleanup; default: $KEEP_E2E_DIR set. */
  keepDir?: boolean;
  /** A private CA's PEM file, given as --ca-file to every agent and the join API. */
  caFile?: string;
  /** Called with one line for every notable moment (the demo prints them). */
  log?: (line: string) => void;
  /** This etcd binary instead of the version under test. */
  etcdBin?: string;
  /** The cluster's policy, set before any agent starts (e.g. `{ maxInFlight: 6 }`). */
  policy?: Record<string, number>;
  /** How an agent is started, given its `join-broker` arguments (default: this Node running bin/join-broker). */
  agentCommand?: (args: string[]) => AgentCommand;
  /**
   * etcd with TLS and client-certificate auth on both ports (the default, as production runs
   * it): an operator's CA in every node's --pki-dir and the join API's, joiners' certificates
   * signed by the join API (in gate mode, each node's installer makes them from the CA in its
   * PKI directory, test/support/gate.ts). false: plain http.
   */
  etcdTls?: boolean;
  /**
   * The operator's etcd CA as a tool made it (TLS runs), instead of one this harness makes: `dir`
   * holds ca.crt and ca.key and is the join API's --pki-dir as it is; every node's --pki-dir gets
   * copies of both (whichever node the broker lets bootstrap signs its own with them), unless
   * `nodePkiDirs` names a node's own directory, used as it is. `joinApiClient`: the join API's
   * etcd client certificate (e.g. kubeadm's apiserver-etcd-client), else one signed here.
   * `refused`: the test expects etcd to refuse what this CA signs (the harness's own client
   * certificates are then not judged first).
   */
  operatorCa?: { dir: string; nodePkiDirs?: Record<string, string>; joinApiClient?: TlsFiles; refused?: boolean };
  /**
   * Run in this lab (test/lab/lab.ts): every node on a host of its own named after it, its etcd
   * on ports 2379/2380 of the host's address; the broker (`join-broker serve`) on host `broker`
   * and the join API on host `join-api`. Agents and the join API run on their host's clock.
   */
  lab?: Lab;
}

/** A program and its arguments, run in `cwd`. */
export interface AgentCommand {
  command: string;
  args: string[];
  cwd: string;
}

export interface FinalView {
  node: string;
  clusterId: string;
  members: EtcdMember[];
  healthy: boolean;
}

export class ClusterHarness {
  readonly timeline: Timeline;
  /** The harness's own etcd client credentials (TLS runs), for sampling and for tests. */
  readonly etcdClientTls: TlsFiles | null;
  /** The typed broker client, as the admin. */
  readonly client: BrokerClient;
  readonly runs = new Map<string, AgentRun[]>();
  readonly #listeners: ((run: AgentRun, e: AgentEvent) => void)[] = [];
  /** Every process group this harness started, so cleanup reaches etcd processes orphaned by a killed agent. */
  readonly #groups = new Set<number>();
  #sampler: NodeJS.Timeout | null = null;
  #sampling = false;
  readonly #invariants: RunInvariants;
  #violation: string | null = null;

  private constructor(
    readonly options: HarnessOptions,
    readonly dir: string,
    readonly cluster: string,
    readonly etcdBin: string,
    readonly nodes: NodeSpec[],
    readonly broker: BrokerProcess,
    readonly token: string,
    readonly joinApi: JoinApiProcess,
    readonly proxy: FaultProxy | null,
    /** The operator's CA and the harness's own etcd client credentials (TLS runs). */
    readonly pki: StackPki | null,
  ) {
    this.etcdClientTls = pki?.client ?? null;
    this.client = brokerClient(broker);
    this.timeline = new Timeline(options.scenario, options.seed);
    // The broker's default maxInFlight is 1; a scenario's policy may raise it.
    this.#invariants = new RunInvariants(options.policy?.maxInFlight ?? 1);
  }

  static async start(options: HarnessOptions): Promise<ClusterHarness> {
    const cluster =
      options.cluster ??
      `e2e-${options.scenario}`
        .toLowerCase()
        .replace(/[^a-z0-9-]/g, "-")
        .slice(0, 40);
    const etcdBin = options.etcdBin ?? (await etcdBinary());
    const dir = mkdtempSync(join(options.parentDir ?? tmpdir(), `join-broker-${options.scenario}-`));
    const lab = options.lab;
    const ports = lab ? [] : await freePorts(options.nodes.length * 2);
    const tls = options.etcdTls !== false;
    const scheme = tls ? "https" : "http";
    const nodes: NodeSpec[] = [];
    for (const [i, name] of options.nodes.entries()) {
      const ip = lab ? lab.addHost(name).ip : "127.0.0.1";
      const clientURL = `${scheme}://${ip}:${lab ? 2379 : ports[2 * i + 1]}`;
      nodes.push({
        name,
        peerURL: `${scheme}://${ip}:${lab ? 2380 : ports[2 * i]}`,
        clientURL,
        // Server certificates name loopback too, so a forward to 127.0.0.1 passes TLS as it is.
        localClientURL: lab ? await lab.reach(clientURL) : clientURL,
        stateDir: join(dir, name),
        dataDir: join(dir, name, "etcd"),
        pkiDir: options.operatorCa?.nodePkiDirs?.[name] ?? join(dir, name, "pki"),
        ...(lab ? { labHost: name } : {}),
      });
    }
    if (lab) {
      lab.addHost("broker");
      lab.addHost("join-api");
    }
    const operatorCa = options.operatorCa;
    const pki = tls ? await preparePki({ dir, nodePkiDirs: nodes.filter((n) => !operatorCa?.nodePkiDirs?.[n.name]).map((n) => n.pkiDir), operatorCa }) : null;
    let broker: BrokerProcess | null = options.sharedBroker ?? null;
    let joinApi: JoinApiProcess | null = null;
    let proxy: FaultProxy | null = null;
    try {
      broker ??= await startBroker({
        persistDir: join(dir, "broker-state"),
        ...options.broker,
        ...(lab ? { runtime: "serve", labHost: { lab, host: "broker" } } : {}),
      });
      const token = await enrollCluster(broker, cluster, { description: `${options.scenario} nodes`, policy: options.policy });
      joinApi = await startJoinApiProcess({
        broker: broker.url,
        cluster,
        etcd: nodes.map((n) => n.clientURL),
        args: [...(options.caFile ? ["--ca-file", options.caFile] : []), ...(pki?.joinApiArgs ?? []), ...(options.joinApiArgs ?? [])],
        lab,
      });
      if (options.faultProxy) proxy = await startFaultProxy(joinApi.url, options.random ?? Math.random);
      const h = new ClusterHarness(options, dir, cluster, etcdBin, nodes, broker, token, joinApi, proxy, pki);
      if (joinApi.proc.pid) h.#groups.add(joinApi.proc.pid);
      return h;
    } catch (e) {
      if (joinApi?.proc.pid) killGroup(joinApi.proc.pid, "SIGKILL");
      await proxy?.close();
      if (!options.sharedBroker) await broker?.stop(true);
      rmSync(dir, { recursive: true, force: true });
      throw e;
    }
  }

  /** The operator's etcd CA (ca.crt, ca.key) that the join API signs with, on TLS runs. */
  get pkiCaDir(): string | null {
    return this.pki?.caDir ?? null;
  }

  /**
   * A gateway to these etcd endpoints, with the harness's client certificate on TLS runs. There
   * the bootstrap node turns etcd's auth on: the harness signs in as root (it holds the CA key,
   * as a join API does), once for all its gateways.
   */
  etcd(endpoints: string | string[], timeoutMs = 5_000): EtcdGateway {
    // A node's own client URL is reached through its forward when the run is in a lab.
    const local = (url: string) => this.nodes.find((n) => n.clientURL === url)?.localClientURL ?? url;
    endpoints = typeof endpoints === "string" ? local(endpoints) : endpoints.map(local);
    if (!this.pki) return new EtcdGateway(endpoints, { timeoutMs });
    return new EtcdGateway(endpoints, {
      timeoutMs,
      fetch: tlsFetch(this.pki.client),
      credentials: { user: this.pki.rootUser, password: this.pki.rootPassword() },
      session: this.#etcdSession,
    });
  }
  readonly #etcdSession: { token: string | null } = { token: null };

  /** The URL agents use for the join API (through the fault proxy, when there is one). */
  get joinApiUrl(): string {
    return this.proxy?.url ?? this.joinApi.url;
  }

  node(name: string): NodeSpec {
    const n = this.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`no node ${name}`);
    return n;
  }

  /** The latest run of this node's agent. */
  current(name: string): AgentRun | undefined {
    const list = this.runs.get(name);
    return list?.[list.length - 1];
  }

  onEvent(listener: (run: AgentRun, e: AgentEvent) => void): void {
    this.#listeners.push(listener);
  }

  log(line: string): void {
    this.options.log?.(line);
  }

  /** Who the agent is and where it asks: the flags every agent of this harness starts with. */
  #agentIdentity(node: NodeSpec) {
    return { broker: this.broker.url, cluster: this.cluster, token: this.token, node: node.name, peerURL: node.peerURL, stateDir: node.stateDir };
  }

  /** The agent's flags for this node; `overrides` replaces some (another cluster, token, join API, timeout). */
  agentArgs(node: NodeSpec, overrides: Partial<JoinArgs> = {}): string[] {
    return joinArgv({
      ...this.#agentIdentity(node),
      joinApi: this.joinApiUrl,
      etcdBin: this.etcdBin,
      dataDir: node.dataDir,
      clientURL: node.clientURL,
      pkiDir: this.pki ? node.pkiDir : undefined,
      caFile: this.options.caFile,
      logFormat: "json",
      timeoutSeconds: 600,
      extra: this.options.agentArgs,
      ...overrides,
    });
  }

  /**
   * Gate mode: `join-broker join --exec COMMAND` for this node, asking every node's etcd whether
   * it is a voter. No join API, no --etcd-bin: COMMAND adds the member and runs etcd.
   */
  gateAgentArgs(node: NodeSpec, exec: string, extra: string[] = []): string[] {
    return joinArgv({
      ...this.#agentIdentity(node),
      clientURL: node.clientURL,
      etcd: this.nodes.map((n) => n.clientURL),
      etcdClient: this.etcdClientTls ?? undefined,
      exec,
      logFormat: "json",
      timeoutSeconds: 600,
      extra,
    });
  }

  /** Starts (or restarts) a node's agent as its own process group; `args` replaces the usual flags. */
  startAgent(name: string, options: { args?: string[] } = {}): AgentRun {
    const node = this.node(name);
    const previous = this.runs.get(name) ?? [];
    const args = options.args ?? this.agentArgs(node);
    // E2E_AGENT_NODE runs the agents on another Node (the system's Node 20, say) than the tests.
    const how = this.options.agentCommand?.(args) ?? { command: process.env.E2E_AGENT_NODE || process.execPath, args: [BIN, ...args], cwd: ROOT };
    const lab = this.options.lab;
    const spawnOptions = {
      cwd: how.cwd,
      stdio: ["ignore", "pipe", "pipe"] as ["ignore", "pipe", "pipe"],
      detached: true,
      env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0", ...(lab && node.labHost ? lab.clockEnv(node.labHost) : {}) },
    };
    // In a lab, on the node's own host (`ip netns exec` execs the agent: the pid is the agent's).
    const proc = lab && node.labHost ? lab.spawn(node.labHost, how.command, how.args, spawnOptions) : spawn(how.command, how.args, spawnOptions);
    const run: AgentRun = {
      node,
      run: previous.length + 1,
      proc,
      pid: proc.pid!,
      events: [],
      stdout: "",
      otherOutput: [],
      exit: null,
      exited: exitedWithOutput(proc),
    };
    void run.exited.then((x) => {
      run.exit = x;
      this.timeline.add("agent-exit", name, { run: run.run, code: x.code, signal: x.signal });
    });
    this.#groups.add(run.pid);
    this.runs.set(name, [...previous, run]);
    this.timeline.add(run.run === 1 ? "agent-start" : "agent-restart", name, { run: run.run, pid: run.pid });
    proc.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      run.stdout += chunk;
    });
    let pending = "";
    proc.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
      pending += chunk;
      let nl: number;
      while ((nl = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        this.#line(run, line);
      }
    });
    return run;
  }

  #line(run: AgentRun, line: string): void {
    if (!line.trim()) return;
    let e: AgentEvent;
    try {
      e = JSON.parse(line) as AgentEvent;
      if (typeof e.step !== "string") throw new Error("not an event");
    } catch {
      run.otherOutput.push(line);
      if (run.otherOutput.length > 200) run.otherOutput.shift();
      return;
    }
    run.events.push(e);
    if (e.step !== "retry") {
      const { time: _t, node: _n, step: _s, msg, ...fields } = e;
      this.timeline.add(e.step, run.node.name, { run: run.run, msg, ...fields });
    }
    for (const l of this.#listeners) l(run, e);
  }

  /** SIGKILL: the agent alone (its etcd runs on, orphaned) or its whole process group (etcd dies too). */
  async kill(name: string, mode: "agent" | "group"): Promise<AgentRun> {
    const run = this.current(name);
    if (!run || run.exit) throw new Error(`agent ${name} is not running`);
    this.timeline.add("sigkill", name, { run: run.run, mode, lastStep: run.events[run.events.length - 1]?.step });
    if (mode === "group") killGroup(run.pid, "SIGKILL");
    else run.proc.kill("SIGKILL");
    await run.exited;
    return run;
  }

  /** SIGTERM to the agent: it stops its etcd and exits. */
  async stop(name: string, timeoutMs = 30_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    const run = this.current(name);
    if (!run) throw new Error(`agent ${name} never ran`);
    if (run.exit) return run.exit;
    run.proc.kill("SIGTERM");
    const timer = setTimeout(() => killGroup(run.pid, "SIGKILL"), timeoutMs);
    const x = await run.exited;
    clearTimeout(timer);
    return x;
  }

  /** Polls `check` every 100 ms until it is true; throws after `timeoutMs` with `what` and the agents' last steps. */
  async waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      this.assertInvariants();
      if (await check()) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}\n${this.describeAgents()}`);
  }

  /** Resolves once the node's current agent reports `step`. */
  waitForStep(name: string, step: string, timeoutMs = 120_000): Promise<void> {
    return this.waitFor(`${name} to reach ${step}`, () => !!this.current(name)?.events.some((e) => e.step === step), timeoutMs);
  }

  /** Whether this node's current agent printed its `joined cluster` line. */
  joined(name: string): boolean {
    return /^joined cluster \S+ as (bootstrap|join)$/m.test(this.current(name)?.stdout ?? "");
  }

  /** One line per agent: its runs, last step and exit. */
  describeAgents(): string {
    return this.nodes
      .map((n) => {
        const r = this.current(n.name);
        if (!r) return `  ${n.name}: not started`;
        const last = r.events[r.events.length - 1];
        const exit = r.exit ? ` exited ${r.exit.code ?? r.exit.signal}` : "";
        const other = r.otherOutput.length ? ` | ${r.otherOutput.slice(-3).join(" | ")}` : "";
        return `  ${n.name} run ${r.run}: ${last ? `${last.step}: ${last.msg}` : "no progress yet"}${exit}${other}`;
      })
      .join("\n");
  }

  /** Samples etcd's member list every second into the timeline. */
  startSampling(): void {
    if (this.#sampler) return;
    this.#sampler = setInterval(() => {
      if (this.#sampling) return;
      this.#sampling = true;
      this.sampleNow()
        .catch(() => undefined)
        .finally(() => (this.#sampling = false));
    }, 1000);
  }

  /**
   * Reads every node's member list, records the first answer in the timeline, and checks the run
   * invariants on all of them (test/support/invariants.ts): a violation is written to the
   * timeline and fails the run at the next `waitFor` or `stopSampling`.
   */
  async sampleNow(): Promise<void> {
    const lists = await Promise.all(this.nodes.map(async (n) => ({ node: n.name, list: await this.etcd(n.localClientURL, 800).memberList() })));
    const samples: NodeSample[] = lists.map(({ node, list }) =>
      list.ok
        ? { node, clusterId: hex(list.value.header.clusterId), learners: list.value.members.filter((m) => m.isLearner).length }
        : { node, clusterId: null, learners: null },
    );
    const first = lists.find((l) => l.list.ok)?.list;
    if (first?.ok) {
      const members = first.value.members;
      const learners = members.filter((m) => m.isLearner).length;
      this.timeline.sample({ members: members.length, voters: members.length - learners, learners, clusterId: hex(first.value.header.clusterId) });
    } else {
      this.timeline.sample({ members: 0, voters: 0, learners: 0, clusterId: null });
    }
    const violation = this.#invariants.check(samples);
    if (violation && !this.#violation) {
      this.timeline.add("invariant-violated", undefined, { violation, samples });
      this.log(`invariant violated: ${violation}`);
      this.#violation = violation;
    }
  }

  /** Throws, with the timeline, when a sample broke a run invariant. */
  assertInvariants(): void {
    if (this.#violation) throw new InvariantViolation(`[${this.options.scenario}] ${this.#violation}\n${this.timeline.render()}`);
  }

  /** Stops sampling; throws when a sample broke a run invariant. */
  stopSampling(): void {
    this.#stopSampler();
    this.assertInvariants();
  }

  #stopSampler(): void {
    if (this.#sampler) clearInterval(this.#sampler);
    this.#sampler = null;
  }

  /** Every node's own view: its cluster ID, the member list it serves, and its /health. */
  async finalViews(names: string[]): Promise<FinalView[]> {
    const views: FinalView[] = [];
    for (const name of names) {
      const n = this.node(name);
      const gateway = this.etcd(n.localClientURL);
      const list = await gateway.memberList();
      if (!list.ok) throw new Error(`member list from ${name} (${n.clientURL}) failed: ${list.error.message}`);
      const status = await gateway.status(n.localClientURL);
      if (!status.ok) throw new Error(`status from ${name} failed: ${status.error.message}`);
      views.push({ node: name, clusterId: hex(status.value.header.clusterId), members: list.value.members, healthy: await gateway.health(n.localClientURL) });
    }
    return views;
  }

  /** The broker's whole audit log (every entry with its time: the broker always writes it). */
  async audit(): Promise<(AuditEntry & { time: string })[]> {
    const out: (AuditEntry & { time: string })[] = [];
    let after = 0;
    for (let page = 0; page < 100; page++) {
      const { body } = await this.client.admin(this.cluster).audit({ after, limit: 1000 });
      for (const e of body.entries) {
        if (e.time === undefined) throw new Error(`audit entry ${e.seq} has no time`);
        out.push({ ...e, time: e.time });
      }
      if (body.entries.length < 1000) break;
      after = body.next;
    }
    return out;
  }

  async restartBroker(): Promise<void> {
    this.timeline.add("broker-restart-begin");
    this.log("restarting the broker");
    await this.broker.restart();
    this.timeline.add("broker-restart-end");
  }

  /**
   * What each node's etcd says of its peer connections (its /metrics: etcd_network_active_peers,
   * etcd_server_is_leader), one clause per node. A voter the leader does not count as connected
   * keeps every membership change refused with "unhealthy cluster".
   */
  async peerConnections(): Promise<string> {
    const list = await this.etcd(
      this.nodes.map((n) => n.clientURL),
      2_000,
    ).memberList();
    const names = new Map(
      list.ok ? list.value.members.map((m) => [BigInt(m.id).toString(16), `${m.name || "(not started)"}${m.isLearner ? " (learner)" : ""}`]) : [],
    );
    const get = this.etcdClientTls ? tlsFetch(this.etcdClientTls) : fetch;
    const clauses = await Promise.all(
      this.nodes.map(async (n) => {
        try {
          const text = await (await get(`${n.localClientURL}/metrics`, { signal: AbortSignal.timeout(2_000) })).text();
          const leader = /^etcd_server_is_leader 1$/m.test(text);
          const active = [...text.matchAll(/^etcd_network_active_peers\{Local="\w+",Remote="(\w+)"\} (\d+)/gm)]
            .filter((m) => m[2] !== "0")
            .map((m) => names.get(m[1]!) ?? m[1]!);
          return `${n.name}${leader ? " (leader)" : ""} connected to ${active.join(", ") || "no peer"}`;
        } catch (e) {
          return `${n.name}: no metrics (${(e as Error).message})`;
        }
      }),
    );
    return clauses.join("; ");
  }

  /** Copies every `*.log` file under the run's temp dir (each etcd's log) to `test-results/…/<name>/`; returns that dir. */
  keepLogs(name: string): string {
    const dest = join(this.broker.runtime === "serve" ? join(RESULTS_DIR, "serve") : RESULTS_DIR, name);
    rmSync(dest, { recursive: true, force: true });
    const walk = (dir: string, rel: string): void => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        if (e.isDirectory()) walk(join(dir, e.name), join(rel, e.name));
        else if (e.isFile() && /\.log(\.\d+)?$/.test(e.name)) {
          mkdirSync(join(dest, rel), { recursive: true });
          copyFileSync(join(dir, e.name), join(dest, rel, e.name));
        }
      }
    };
    walk(this.dir, "");
    return dest;
  }

  /** Writes the timeline, with every agent's last step and exit (the etcd logs stay in the temp dir until cleanup). */
  writeTimeline(summary: Record<string, unknown> = {}): string {
    // A run against join-broker serve keeps its timelines apart from the wrangler dev run's.
    const dir = this.broker.runtime === "serve" ? join(RESULTS_DIR, "serve") : RESULTS_DIR;
    const path = this.timeline.write(dir, {
      ...summary,
      runtime: this.broker.runtime,
      agents: this.describeAgents()
        .split("\n")
        .map((l) => l.trim()),
      // Whatever else each agent run printed (an installer's own lines: why it gave up), whole.
      output: Object.fromEntries(
        [...this.runs.entries()].flatMap(([name, runs]) => runs.filter((r) => r.otherOutput.length).map((r) => [`${name} run ${r.run}`, r.otherOutput])),
      ),
    });
    console.log(`[${this.options.scenario}] timeline: ${path}`);
    return path;
  }

  /** Stops every process this harness started (agents, their etcd, join API, proxy, broker) and removes the temp dir. */
  async cleanup(): Promise<void> {
    this.#stopSampler();
    const live = [...this.runs.values()].flat().filter((r) => !r.exit);
    for (const r of live) r.proc.kill("SIGTERM");
    await Promise.race([Promise.all(live.map((r) => r.exited)), new Promise((r) => setTimeout(r, 15_000))]);
    for (const pgid of this.#groups) killGroup(pgid, "SIGKILL");
    // etcd processes an agent left behind when it was killed alone live in that agent's old group,
    // already signalled above; this also catches any whose group leader was reused.
    for (const pid of processesUnder(this.dir)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        /* gone */
      }
    }
    await this.proxy?.close();
    if (!this.options.sharedBroker) await this.broker.stop(true);
    if (this.options.keepDir ?? !!process.env.KEEP_E2E_DIR) console.log(`[${this.options.scenario}] kept ${this.dir}`);
    else rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * A process's exit, once its output is read too: "exit" can come before the last lines on its
 * pipes are. A descendant that keeps a pipe open (it inherited it) gets 2 s, not forever. A
 * process killed by a signal wrote nothing after it, and its descendants (a gate-mode installer
 * outliving a killed agent) may hold its pipes: its exit counts at once.
 */
function exitedWithOutput(proc: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) =>
    proc.once("exit", (code, signal) => {
      if (signal) return resolve({ code, signal });
      const streams = [proc.stdout, proc.stderr].filter((s) => s !== null && !s.closed);
      const read = Promise.all(streams.map((s) => new Promise((r) => s!.once("close", r))));
      let timer: NodeJS.Timeout | undefined;
      const patience = new Promise((r) => (timer = setTimeout(r, 2_000)));
      void Promise.race([read, patience]).then(() => {
        clearTimeout(timer);
        resolve({ code, signal });
      });
    }),
  );
}

/** etcd's IDs in hex, as etcd itself prints them. */
export function hex(decimal: string): string {
  try {
    return BigInt(decimal).toString(16);
  } catch {
    return decimal;
  }
}

function killGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    /* the group is gone */
  }
}

/** Processes whose arguments mention `dir` (the etcd processes of this harness's nodes). */
function processesUnder(dir: string): number[] {
  const found: number[] = [];
  let entries: string[] = [];
  try {
    entries = readdirSync("/proc");
  } catch {
    return found;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8");
      if (argv.includes(`--data-dir=${dir}/`)) found.push(Number(entry));
    } catch {
      /* exited meanwhile */
    }
  }
  return found;
}

/**
 * A whole cluster that admits `maxInFlight` nodes at once: on MULTI_LEARNER_VERSION (etcd 3.6 or
 * later, which allows several learners), seeded by the scenario's name.
 */
export async function startPipelinedCluster(scenario: string, nodes: string[], maxInFlight: number): Promise<ClusterHarness> {
  return ClusterHarness.start({ scenario, seed: e2eSeed(scenario), nodes, etcdBin: await etcdBinaryFor(MULTI_LEARNER_VERSION), policy: { maxInFlight } });
}
