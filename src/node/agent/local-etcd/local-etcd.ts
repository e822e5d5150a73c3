/**
 * This node's own etcd, as the agent runs it: its flags (from what the agent recorded and the
 * binary's version), starting it (or handing the flags to another supervisor), waiting until it
 * serves, is a voter or is healthy, making sure the etcd that answers is this node's, and moving
 * a removed learner's data aside. The agent's state (what it recorded of this etcd) stays the
 * agent's: it is reached through the host.
 * @module
 */
import { existsSync, renameSync } from "node:fs";
import { writeFileAtomic } from "../../atomic-file.ts";
import { EtcdGateway, type EtcdMember, type EtcdStatus } from "../../etcd/gateway.ts";
import { tlsFetch } from "../../etcd/tls-fetch.ts";
import { grpcReads, type EtcdReads } from "../../etcd/grpc-reads.ts";
import type { EtcdTraits } from "../../etcd/versions.ts";
import { ownClientFiles, pkiFiles, setOwnCertificatesAside } from "../../pki/pki-dir.ts";
import type { Role } from "../../../shared/protocol/wire.ts";
import { memberIdHex } from "../../../shared/protocol/member-id.ts";
import type { DiskFacts, RefusalRule } from "../files/data-dir-rules.ts";
import { decideDataDir, unwrittenBootstrap } from "../files/data-dir-rules.ts";
import { GaveUp, Refusal } from "../core/errors.ts";
import { EtcdSupervisor } from "./etcd-supervisor.ts";
import { foreignEtcd, type ExpectedEtcd } from "./etcd-identity.ts";
import type { AgentOptions } from "../core/agent-options.ts";
import { learnerArgs, ownEtcdFlags } from "./own-etcd-flags.ts";
import { LeaseLost } from "../core/lease.ts";
import type { Reporter } from "../core/progress.ts";
import { PeriodicNote, sleep } from "../core/retry.ts";
import { TlsWatch } from "./tls-watch.ts";
import { hasEtcdData, type EtcdOwnership, type StateDir } from "../files/state-files.ts";

/** How often `wait` asks the local etcd. */
const WAIT_POLL_MS = 25;

/** What the agent lends its etcd: its record of it, and its words for a refused data dir. */
export interface LocalEtcdHost {
  owned(): EtcdOwnership | undefined;
  saveOwned(owned: EtcdOwnership | undefined): void;
  disk(): DiskFacts;
  refusal(rule: RefusalRule, role: Role, why: string): string;
  /** Prints etcd's flags on stdout (--print-etcd-flags). */
  print(line: string): void;
  /** etcd was started (or handed its flags). */
  started?(): void;
  /** Right before etcd starts: the revocation list file it will read is there. */
  beforeStart?(): Promise<void>;
}

export class LocalEtcd {
  /**
   * Asks this node's etcd, as this node: with --pki-dir over gRPC with its peer certificate
   * (etcd's JSON gateway, with auth on, answers no client certificate), else the JSON gateway.
   */
  readonly gateway: EtcdReads;
  /** null without --etcd-bin: another supervisor runs etcd with the flags the agent writes. */
  readonly supervisor: EtcdSupervisor | null;
  readonly #o: AgentOptions;
  readonly #r: Reporter;
  readonly #dir: StateDir;
  readonly #host: LocalEtcdHost;
  /** With --pki-dir: etcd's certificate refusals, reported and judged while the agent waits. */
  readonly #tls: TlsWatch | null;
  #printedFlags = "";
  /** The etcd binary's entry in the version table, once asked (null without --etcd-bin, or when it cannot be told). */
  #traits: EtcdTraits | null = null;
  #learnerLimitNoted = false;
  #foreignAnswered = false;

  constructor(options: AgentOptions, reporter: Reporter, dir: StateDir, host: LocalEtcdHost) {
    this.#o = options;
    this.#r = reporter;
    this.#dir = dir;
    this.#host = host;
    this.supervisor = options.etcdBin
      ? new EtcdSupervisor(options.etcdBin, dir, options.dataDir, {
          onUnexpectedExit: (how, again) =>
            reporter.event("etcd-exit", `etcd ${how}${again ? "; starting it again" : "; not starting it again"}`, { restart: again }),
          onLeftoverStopped: (pid) => reporter.event("etcd-start", `stopped etcd (pid ${pid}) left running on ${options.dataDir} by an earlier run`, { pid }),
          beforeSpawn: () => this.#setAsideUnwrittenBootstrap(),
        })
      : null;
    this.#tls = options.pkiDir ? new TlsWatch(pkiFiles(options.pkiDir), reporter, this.supervisor, options.clientURL) : null;
    if (options.pkiDir) {
      const files = ownClientFiles(options.pkiDir);
      const health = new EtcdGateway(options.clientURL, { timeoutMs: 3_000, fetch: this.#tls!.watched(tlsFetch(files)) });
      this.gateway = grpcReads(options.clientURL, files, (endpoint) => health.health(endpoint), {
        timeoutMs: 3_000,
        onHandshakeError: (e) => this.#tls?.refusedOwn(e),
      });
    } else {
      this.gateway = new EtcdGateway(options.clientURL, { timeoutMs: 3_000 });
    }
  }

  /** Another etcd answered on the client URL: its word says nothing about this node's etcd. */
  get foreignAnswered(): boolean {
    return this.#foreignAnswered;
  }

  /**
   * Stops with GaveUp when the supervised etcd keeps failing. When etcd exited because its member
   * was removed from the cluster, a learner's data is moved aside instead and the node joins again
   * (LeaseLost): the join API adds it anew.
   */
  async check(): Promise<void> {
    if (!this.supervisor?.failure) return;
    if (this.supervisor.removed) {
      await this.discardLearnerData("etcd says this member was removed from the cluster");
      throw new LeaseLost("member_removed", "this node's learner was removed from the cluster; joining again");
    }
    throw this.gaveUp(this.supervisor.failure);
  }

  /** etcd keeps failing: its log's tail, then the reason (etcd's own error in it) on the last line. */
  gaveUp(failure: string): GaveUp {
    return new GaveUp(this.withLogTail(`etcd keeps failing: ${failure}`));
  }

  withLogTail(last: string): string {
    const tail = this.supervisor?.logTail(2000).trimEnd();
    return tail ? `etcd's log ends with:\n${tail}\n${last}` : last;
  }

  /**
   * The learner this node started was removed from etcd (its lease ended and the join API made
   * room for the next node, say): its data belongs to no cluster any more and etcd refuses it.
   * Stop etcd and move the data aside (never delete it), so that the next add starts from
   * scratch. Only for a node that never was a voter and did not bootstrap, as its state files
   * tell: a learner holds nothing the cluster lacks. Anything else is refused (exit 3).
   */
  async discardLearnerData(why: string, options: { keepCertificates?: boolean } = {}): Promise<void> {
    const { dataDir } = this.#o;
    const decision = decideDataDir(this.#host.disk(), { kind: "removed" });
    if (decision.action === "refuse") throw new Refusal(this.#host.refusal(decision.rule, "join", why));
    const s = this.supervisor?.running ? await this.gateway.status(this.#o.clientURL) : null;
    if (s?.ok && !s.value.isLearner) throw new Refusal(`the local etcd is a voter, yet: ${why}`);
    if (!this.supervisor) throw new Refusal(`this node's learner was removed from etcd (${why}): stop etcd, move ${dataDir} away and run again`);
    await this.supervisor.stop();
    await this.supervisor.stopLeftovers();
    const at = Date.now();
    if (existsSync(dataDir)) {
      const aside = `${dataDir}.removed-${at}`;
      renameSync(dataDir, aside);
      this.#r.event("etcd-exit", `${why}: moved the removed learner's data to ${aside}; etcd starts fresh once the join API adds this node again`, { aside });
    }
    // Its certificates went with its member (the join API revoked them): the next add asks for new ones.
    if (this.#o.pkiDir && !options.keepCertificates) {
      const moved = setOwnCertificatesAside(this.#o.pkiDir, `removed-${at}`);
      if (moved.length)
        this.#r.event("pki", `moved the removed learner's keys and certificates aside (*.removed-${at}): the next add asks for new ones`, {
          moved: moved.length,
        });
    }
    this.#host.saveOwned(undefined);
    this.supervisor.startOver();
  }

  /**
   * Before each etcd start (a restarted agent's, the supervisor's after an exit): this node's own
   * bootstrap data that raft never wrote to goes aside, and etcd starts the new cluster afresh
   * instead of waiting forever for a leader on it (data-dir-rules.ts `unwrittenBootstrap`).
   */
  #setAsideUnwrittenBootstrap(): void {
    const { dataDir, cluster } = this.#o;
    if (!unwrittenBootstrap(this.#host.disk(), cluster)) return;
    const aside = `${dataDir}.unwritten-${Date.now()}`;
    renameSync(dataDir, aside);
    this.#r.event(
      "etcd-start",
      `etcd's data in ${dataDir} holds nothing: etcd was stopped within its first start, before it wrote the cluster's first member, ` +
        `and would never elect a leader on it; moved it to ${aside}, starting the new cluster afresh`,
      { aside },
    );
  }

  /** Records, once, that this node's member is a voter: from then on its data is never moved aside. */
  markVoter(): void {
    const owned = this.#host.owned();
    if (owned && !owned.voter) this.#host.saveOwned({ ...owned, voter: true });
  }

  /**
   * After a restart, or back in the queue: a member's etcd (data present, same role as before)
   * runs again while the agent catches up. One that etcd says was removed from the cluster is
   * not started again: a learner's data is moved aside now (the next add starts it fresh).
   */
  async resumeOwn(role: Role): Promise<void> {
    const owned = this.#host.owned();
    if (!this.supervisor || this.supervisor.running || !owned || owned.role !== role || !hasEtcdData(this.#o.dataDir)) return;
    if (this.supervisor.removed) {
      await this.discardLearnerData(`etcd says member ${owned.memberID ? memberIdHex(owned.memberID) : "?"} was removed from the cluster`);
      return;
    }
    if (this.supervisor.failure) throw this.gaveUp(this.supervisor.failure);
    this.#r.event("etcd-start", `starting etcd on its existing data in ${this.#o.dataDir}`);
    await this.know();
    await this.#host.beforeStart?.();
    await this.supervisor.start(this.#args());
    this.#host.started?.();
  }

  record(fields: Omit<EtcdOwnership, "cluster" | "node" | "at">): void {
    this.#host.saveOwned({ cluster: this.#o.cluster, node: this.#o.node, at: new Date().toISOString(), ...fields });
  }

  #args(): string[] {
    const learners = this.#host.owned()!.maxLearners ?? 1;
    const known = learnerArgs(learners, this.#traits, !!this.supervisor);
    if (known.refused && !this.#learnerLimitNoted) {
      this.#learnerLimitNoted = true;
      this.#r.event(
        "etcd-start",
        `the cluster admits ${learners} nodes at once, but ${known.refused}; etcd will hold one learner at a time and the others wait`,
        { maxInFlight: learners },
      );
    }
    return ownEtcdFlags(this.#o, this.#host.owned()!, known.args);
  }

  /** Asks the etcd binary its version once, for its flag names (failures surface when etcd is started). */
  async know(): Promise<void> {
    if (!this.supervisor || this.#traits) return;
    try {
      this.#traits = (await this.supervisor.version()).traits;
    } catch {
      // EtcdSupervisor.start reports a binary that cannot run or is not a supported etcd.
    }
  }

  /** Starts etcd (or, without --etcd-bin, hands its flags to whoever does). */
  async start(signal: AbortSignal): Promise<void> {
    await this.know();
    await this.#host.beforeStart?.();
    const args = this.#args();
    const text = `${args.join("\n")}\n`;
    if (text !== this.#printedFlags) {
      writeFileAtomic(this.#dir.etcdFlagsPath, text);
      if (this.#o.printEtcdFlags) this.#host.print(args.join("\n"));
      this.#printedFlags = text;
    }
    if (signal.aborted) throw signal.reason;
    if (!this.supervisor) {
      this.#r.event("etcd-start", `waiting for etcd to be started with the flags in ${this.#dir.etcdFlagsPath} (client URL ${this.#o.clientURL})`);
      return;
    }
    this.#host.started?.();
    if (this.supervisor.running) return;
    if (this.supervisor.failure) throw this.gaveUp(this.supervisor.failure);
    this.#r.event("etcd-start", `starting etcd (${this.#host.owned()!.initialClusterState === "new" ? "a new cluster" : "joining the existing cluster"})`, {
      state: this.#host.owned()!.initialClusterState,
    });
    await this.supervisor.start(args);
  }

  /**
   * Polls the local etcd until it serves (any member), is a voter, or is healthy (voter with a
   * leader). With `expected`, whatever answers must be this node's own etcd (etcd-identity.ts)
   * before anything it says counts: anything else is refused.
   */
  async wait(want: "serving" | "voter" | "healthy", signal: AbortSignal, expected?: ExpectedEtcd): Promise<EtcdStatus> {
    const began = performance.now();
    const note = new PeriodicNote();
    let last = "";
    for (;;) {
      await this.check();
      const s = await this.gateway.status(this.#o.clientURL);
      // Certificate refusals etcd logged or this request met: reported now; a hopeless start ends here.
      if (s.ok) this.#tls?.answered();
      this.#tls?.check();
      if (s.ok && expected && !(await this.#isOwn(expected, s.value))) {
        last = "not sure yet which etcd answers";
      } else if (s.ok) {
        const v = s.value;
        if (!v.isLearner) this.markVoter();
        if (want === "serving") return v;
        if (!v.isLearner && want === "voter") return v;
        if (!v.isLearner && want === "healthy" && v.leader && (await this.gateway.health(this.#o.clientURL))) return v;
        last = v.isLearner ? "still a learner" : v.leader ? "not healthy yet" : "no leader yet";
      } else {
        last = s.error.message;
      }
      if (note.due()) {
        this.#r.retry(`waiting for etcd at ${this.#o.clientURL} to be ${want} (${Math.round((performance.now() - began) / 1000)} s): ${last}`);
      }
      // Its own etcd, on this machine: asked often, so that what follows (the promote, the report)
      // starts within moments of etcd being ready.
      await sleep(WAIT_POLL_MS, signal);
    }
  }

  /**
   * Whether the etcd answering on the client URL is this node's (false while that cannot be told
   * yet); throws a Refusal when another etcd answers there.
   */
  async #isOwn(expected: ExpectedEtcd, status: EtcdStatus): Promise<boolean> {
    let members: EtcdMember[] = [];
    if (expected.kind === "bootstrap") {
      const list = await this.gateway.memberList();
      if (!list.ok || list.value.header.memberId !== status.header.memberId) return false;
      members = list.value.members;
    }
    const foreign = foreignEtcd(expected, status, members);
    if (!foreign) return true;
    const own = this.supervisor?.failure ?? (this.supervisor && !this.supervisor.running ? "this node's etcd is not running" : null);
    this.#foreignAnswered = true;
    throw new Refusal(
      `another etcd answers on ${this.#o.clientURL}: ${foreign}. This node will not call it its own, nor report it to the broker` +
        `${own ? ` (${own})` : ""}. Stop that etcd (or fix --client-url) and run this command again.`,
    );
  }
}
