/**
 * The node agent's state machine. Each step is safe to crash at: run the same command again and
 * it resumes from what the broker, etcd and the state dir say.
 *
 *   marker? ──yes──▶ (start etcd on its data) ▶ joined
 *     │no
 *   ticket (idempotent POST) ▶ queued (long polls) ▶ admitted ─┬─ role bootstrap ▶ etcd `new` ▶ healthy ─┐
 *                                                              └─ role join ▶ learner add ▶ etcd `existing`
 *                                                                   ▶ promote until a voter ─────────────┤
 *                                                              complete ◀────────────────────────────────┘
 *                                                              ▶ marker ▶ joined (supervise etcd)
 *
 * The broker alone decides between bootstrap and join; local files never do. etcd is started
 * with `--initial-cluster-state new` only for the broker's bootstrap ticket, and a data dir this
 * agent did not fill for this cluster is never started. While admitted, a lease keeper
 * heartbeats; if the broker ends the admission the current step stops: a revocation refuses
 * (exit 3), an expiry goes back to the queue.
 *
 * A learner whose admission ended may be removed from etcd meanwhile (the join API makes room
 * for the next node). Its data can never serve again, so a node that never was a voter moves it
 * aside and starts fresh once it is added anew; a voter's or a bootstrap node's data is never moved.
 *
 * Gate mode (`--exec`, gate.ts): once admitted, an unmodified installer runs instead of the join
 * API calls and etcd, and etcd's member list decides when the node is a voter.
 * @module
 */
import type { EtcdStatus } from "../etcd/gateway.ts";
import { EXIT, UsageError } from "../exit-codes.ts";
import { BrokerClient } from "../../shared/client/broker-client.ts";
import type { NodeSession } from "../../shared/client/node-session.ts";
import type { TicketView } from "../../shared/protocol/wire.ts";
import { ClusterExists, GaveUp, Refusal, Stopped } from "./errors.ts";
import { askControllers, existingCluster, type ControllerAnswer } from "./existing-cluster.ts";
import { tlsFetch } from "../etcd/tls-fetch.ts";
import { ownClientFiles } from "../pki/pki-dir.ts";
import { bootstrapCertificates } from "./node-certificates.ts";
import { PkiError } from "../pki/x509.ts";
import { LocalEtcd } from "./local-etcd.ts";
import { BrokerSteps } from "./broker-steps.ts";
import type { ExpectedEtcd } from "./etcd-identity.ts";
import { Gate } from "./gate.ts";
import { JoinApiClient } from "./join-api-client.ts";
import { JoinApiSteps } from "./join-api-steps.ts";
import { AdmissionRevoked, LeaseKeeper, LeaseLost } from "./lease.ts";
import type { AgentOptions } from "./join-options.ts";
import type { Reporter } from "./progress.ts";
import { Backoff, sleep, untilAborted, type Random } from "./retry.ts";
import { decideDataDir, ownershipRefusal, type Decision, type DiskFacts, type RefusalRule } from "./data-dir-rules.ts";
import { howToRejoin, refusalMessage, type NodePlace } from "./data-dir-messages.ts";
import { StateDir, hasEtcdData, type AgentState, type JoinedMarker } from "./state-files.ts";
import type { Role } from "../../shared/protocol/wire.ts";
import { memberIdHex } from "../../shared/protocol/member-id.ts";

export interface AgentDeps {
  reporter: Reporter;
  /** Writes one line to stdout. */
  print(line: string): void;
  /** Aborts with `Stopped` on SIGINT/SIGTERM. */
  stop: AbortSignal;
  random?: Random;
}

/** Runs the agent to its end and returns the exit code. */
export async function runAgent(options: AgentOptions, deps: AgentDeps): Promise<number> {
  const dir = new StateDir(options.stateDir);
  try {
    dir.lock();
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  try {
    return await new Agent(options, deps, dir).run();
  } finally {
    dir.unlock();
    deps.reporter.close();
  }
}

class Agent {
  readonly #o: AgentOptions;
  readonly #r: Reporter;
  readonly #dir: StateDir;
  readonly #deps: AgentDeps;
  readonly #random: Random;
  readonly #broker: NodeSession;
  readonly #joinApiSteps: JoinApiSteps;
  readonly #brokerSteps: BrokerSteps;
  readonly #ownEtcd: LocalEtcd;
  /** Gate mode (--exec): an installer adds the member and runs etcd; see gate.ts. */
  readonly #gate: Gate | null;
  #state!: AgentState;

  constructor(options: AgentOptions, deps: AgentDeps, dir: StateDir) {
    this.#o = options;
    this.#deps = deps;
    this.#r = deps.reporter;
    this.#dir = dir;
    this.#random = deps.random ?? Math.random;
    this.#broker = new BrokerClient({ baseUrl: options.brokerUrl }).nodeSession(options.cluster, options.token);
    this.#brokerSteps = new BrokerSteps(this.#broker, options, deps.reporter, this.#random);
    this.#ownEtcd = new LocalEtcd(options, deps.reporter, dir, {
      owned: () => this.#state.etcd,
      saveOwned: (etcd) => this.#saveState({ etcd }),
      disk: () => this.#disk(),
      refusal: (rule, role, why) => refusalMessage(this.#where(), rule, role, why),
      print: (line) => this.#deps.print(line),
    });
    this.#joinApiSteps = new JoinApiSteps(new JoinApiClient(options.joinApiUrl), this.#brokerSteps, this.#broker, this.#ownEtcd, options, deps.reporter, this.#random);
    this.#gate = options.exec ? new Gate(options, deps.reporter, dir) : null;
  }

  async run(): Promise<number> {
    try {
      await this.#gate?.prepare();
      this.#state = this.#loadState();
      // Ask etcd its version (a process start) while the broker is asked for the ticket, not after.
      void this.#ownEtcd.know();
      const marker = this.#dir.readMarker();
      if (marker) return await this.#resumeJoined(marker);
      this.#r.event("start", `joining cluster ${this.#o.cluster} through ${this.#o.brokerUrl} as ${this.#o.node} (${this.#o.peerURL})`, {
        cluster: this.#o.cluster,
        peerURL: this.#o.peerURL,
      });
      const joined = await this.#withDeadline((signal) => this.#join(signal));
      return await this.#serve(joined);
    } catch (e) {
      return await this.#fail(e);
    }
  }

  // ------------------------------------------------------------------ the join

  async #join(signal: AbortSignal): Promise<JoinedMarker> {
    let view = (await this.#brokerSteps.resumeTicket(this.#state.ticket, signal)) ?? (await this.#brokerSteps.requestTicket(signal));
    const pause = new Backoff(1_000, 15_000, this.#random);
    for (;;) {
      this.#saveState({ ticket: view.ticket, role: view.role });
      if (view.state === "queued" || view.state === "admitted") await this.#ownEtcd.resumeOwn(view.role);
      if (view.state === "queued") view = await this.#brokerSteps.waitInQueue(view, signal);
      switch (view.state) {
        case "admitted":
          try {
            return await this.#admitted(view, signal);
          } catch (e) {
            if (!(e instanceof LeaseLost)) throw e;
            this.#r.event("lease", `${e.message}; asking for a ticket again`, { state: e.state });
          }
          break;
        case "joined":
          return await this.#alreadyJoined(view, signal);
        case "revoked":
          throw new AdmissionRevoked(
            `an admin revoked this node's admission${view.reason ? ` (${view.reason})` : ""}; to ask for a new place in the queue, run again with --retry-revoked`,
          );
        default:
          this.#r.event("ticket", `ticket ${view.ticket} ${view.state}${view.reason ? ` (${view.reason})` : ""}; asking for a new one`, { state: view.state });
      }
      await sleep(pause.next(), signal);
      view = await this.#brokerSteps.requestTicket(signal);
    }
  }

  async #admitted(view: TicketView, outer: AbortSignal): Promise<JoinedMarker> {
    const admission = view.admission;
    if (!admission) throw new LeaseLost("admitted", "the broker sent an admitted ticket without its admission token");
    this.#r.event("admitted", `admitted as ${view.role}; lease until ${view.leaseExpiresAt ?? "?"}`, {
      ticket: view.ticket,
      role: view.role,
      jti: view.jti,
      leaseExpiresAt: view.leaseExpiresAt,
    });
    const lease = new LeaseKeeper(this.#broker, view.ticket, admission, view.leaseExpiresAt, this.#random, {
      onTrouble: (m) => this.#r.failure("broker", m),
      onHeartbeat: () => this.#r.reachable("broker"),
    });
    lease.start();
    const signal = AbortSignal.any([outer, lease.signal]);
    try {
      if (view.role === "bootstrap" && !this.#gate) await bootstrapCertificates(this.#o, this.#r);
      if (view.role === "bootstrap") await this.#checkNoClusterYet(signal);
      if (this.#gate) {
        const voter = await this.#gate.admitted(view, admission, signal, (memberID) => this.#brokerSteps.reportStarted(view, admission, memberID, signal));
        await this.#brokerSteps.complete(view, admission, voter.memberID, signal);
        return this.#writeMarkerIds(view, voter.memberID, voter.clusterID);
      }
      return view.role === "bootstrap" ? await this.#bootstrap(view, admission, signal) : await this.#joinAsLearner(view, admission, signal);
    } finally {
      await lease.stop();
    }
  }

  /** The broker's one bootstrap ticket: this node creates the cluster. */
  async #bootstrap(view: TicketView, admission: string, signal: AbortSignal): Promise<JoinedMarker> {
    const { node, peerURL } = this.#o;
    this.#r.event("bootstrap", "this node holds the cluster's bootstrap ticket: starting a new etcd cluster", { ticket: view.ticket });
    this.#checkDataIsOurs("bootstrap");
    this.#ownEtcd.record({ role: "bootstrap", ticket: view.ticket, initialCluster: [`${node}=${peerURL}`], initialClusterState: "new", ...learnerLimit(view) });
    await this.#ownEtcd.start(signal);
    const status = await this.#ownEtcd.wait("healthy", signal, { kind: "bootstrap", peerURL });
    this.#r.event("etcd-ready", `etcd is healthy: cluster ${memberIdHex(status.header.clusterId)}, member ${memberIdHex(status.header.memberId)}`, {
      clusterID: memberIdHex(status.header.clusterId),
      memberID: status.header.memberId,
    });
    await this.#brokerSteps.complete(view, admission, status.header.memberId, signal);
    return this.#writeMarker(view, status);
  }

  /** Every other node: a learner first, then a voter. */
  async #joinAsLearner(view: TicketView, admission: string, signal: AbortSignal): Promise<JoinedMarker> {
    this.#checkDataIsOurs("join");
    this.#r.event("member-add", `asking the join API (${this.#o.joinApiUrl}) to add this node as a learner`, { ticket: view.ticket });
    const added = await this.#joinApiSteps.addMember(view, admission, signal);
    this.#r.event("member-added", `added as ${added.learner ? "learner" : "member"} ${memberIdHex(added.memberID)} of ${added.initialCluster.length}`, {
      memberID: added.memberID,
      memberIDHex: memberIdHex(added.memberID),
      learner: added.learner,
      members: added.initialCluster.length,
    });
    const owned = this.#state.etcd;
    const decision = decideDataDir(this.#disk(), { kind: "added", cluster: this.#o.cluster, memberID: added.memberID, learner: added.learner, started: added.started });
    if (decision.action === "refuse" && decision.rule !== "was_voter" && decision.rule !== "marker_says_joined") throw new Refusal(refusalMessage(this.#where(), decision.rule, "join", memberIdHex(added.memberID)));
    if (decision.action !== "start" && owned?.memberID) {
      // etcd's peer URLs are unique: our peer URL now belongs to the new member, so the member
      // the data was made for is gone. etcd would refuse that data ("permanently removed").
      await this.#ownEtcd.discardLearnerData(`the join API added this node anew as member ${memberIdHex(added.memberID)}; its data belongs to member ${memberIdHex(owned.memberID)}, which was removed`);
    }
    const voter = added.learner === false || (this.#state.etcd?.memberID === added.memberID && this.#state.etcd.voter === true);
    this.#ownEtcd.record({ role: "join", ticket: view.ticket, initialCluster: added.initialCluster, initialClusterState: "existing", memberID: added.memberID, ...(voter ? { voter } : {}), ...learnerLimit(view) });
    await this.#ownEtcd.start(signal);
    const own: ExpectedEtcd = { kind: "member", memberID: added.memberID, per: "the join API added it" };
    let status = await this.#ownEtcd.wait("serving", signal, own);
    this.#r.event("etcd-ready", `etcd is serving as ${status.isLearner ? "a learner" : "a voter"} of cluster ${memberIdHex(status.header.clusterId)}`, {
      clusterID: memberIdHex(status.header.clusterId),
      memberID: status.header.memberId,
      learner: status.isLearner,
    });
    if (status.isLearner) {
      this.#r.event("promote", "asking the join API to promote this learner to a voter", { memberID: status.header.memberId });
      await this.#joinApiSteps.promote(view, admission, signal);
      status = await this.#ownEtcd.wait("voter", signal, own);
    }
    this.#r.event("promoted", `a voter: member ${memberIdHex(status.header.memberId)}`, { memberID: status.header.memberId });
    await this.#brokerSteps.complete(view, admission, status.header.memberId, signal);
    return this.#writeMarker(view, status);
  }

  /** The broker says this node already joined (a crash after `complete`, or an adopted member). */
  async #alreadyJoined(view: TicketView, signal: AbortSignal): Promise<JoinedMarker> {
    const { node, cluster, dataDir } = this.#o;
    if (this.#gate) {
      const voter = await this.#gate.findVoter();
      if (!voter) {
        throw new Refusal(
          `the broker says ${node} already joined cluster ${cluster}, but etcd (${this.#o.etcdEndpoints.join(", ")}) lists no started voter with peer URL ${this.#o.peerURL}. ` +
            `If its member is gone for good: run 'join-broker admin forget ${node} --cluster ${cluster} --broker ${this.#o.brokerUrl}', delete ${this.#dir.markerPath} if it exists, and run this command again.`,
        );
      }
      return this.#writeMarkerIds(view, voter.memberID, voter.clusterID);
    }
    if (refusalOf(decideDataDir(this.#disk(), { kind: "joined", cluster })) === "joined_without_data") {
      throw new Refusal(
        `the broker says ${node} already joined cluster ${cluster}${view.memberID ? ` as member ${memberIdHex(view.memberID)}` : ""}, but ${dataDir} holds no etcd data. ` +
          `This node will not start etcd: it must neither start a new cluster nor reuse a membership whose data is gone. ${howToRejoin(this.#where(), view.memberID ? memberIdHex(view.memberID) : undefined)}`,
      );
    }
    this.#r.event("ticket", `the broker says this node already joined; its etcd data is in ${dataDir}`, { memberID: view.memberID });
    if (!this.#state.etcd) this.#ownEtcd.record({ role: view.role, ticket: view.ticket, initialCluster: [`${node}=${this.#o.peerURL}`], initialClusterState: "existing", voter: true });
    this.#ownEtcd.markVoter();
    await this.#ownEtcd.start(signal);
    const status = await this.#ownEtcd.wait("serving", signal, view.memberID ? { kind: "member", memberID: view.memberID, per: "the broker says so" } : undefined);
    return this.#writeMarker(view, status);
  }

  /**
   * Before acting on a bootstrap ticket: no etcd cluster may already run at the other
   * controllers (`--etcd`). One that answers is refused (the broker's state was rolled back,
   * say); endpoints that cannot be reached are asked twice, then the bootstrap goes ahead.
   */
  async #checkNoClusterYet(signal: AbortSignal): Promise<void> {
    const endpoints = this.#o.controllers;
    if (endpoints.length === 0) return;
    const files = this.#o.etcdTls ?? (this.#o.pkiDir ? ownClientFiles(this.#o.pkiDir) : null);
    const tls = files ? { fetch: tlsFetch(files) } : {};
    let answers = await askControllers(endpoints, this.#o.clientURL, tls);
    if (answers.some((a) => !a.reached)) {
      await sleep(2_000, signal);
      answers = await askControllers(endpoints, this.#o.clientURL, tls);
    }
    const found = existingCluster(answers, this.#o.peerURL);
    if (found) {
      const { cluster, brokerUrl, node } = this.#o;
      const known = (found.members ?? []).filter((m) => m.name);
      const adopt = known.length ? known.map((m) => ` --member ${m.name}=${m.peerURLs[0]}`).join("") : " --member NODE=PEERURL …";
      throw new ClusterExists(
        `the broker gave ${node} the bootstrap ticket of cluster ${cluster}, but etcd at ${found.endpoint} already serves cluster ${memberIdHex(found.clusterID)}` +
          `${found.members ? ` (${found.members.length} member${found.members.length === 1 ? "" : "s"})` : ""}: was the broker's state reset or restored from a backup? ` +
          `This node will not start a second cluster. If that is cluster ${cluster}, tell the broker so: ` +
          `'join-broker admin adopt --cluster ${cluster} --broker ${brokerUrl}${adopt}', then run this command again: it joins that cluster.`,
      );
    }
    const missed = answers.filter((a): a is Extract<ControllerAnswer, { reached: false }> => !a.reached);
    const asked = answers.length - missed.length;
    this.#r.event(
      "bootstrap",
      `no etcd cluster at the other controllers${asked ? ` (${asked} answered)` : ""}` +
        `${missed.length ? `; not reached: ${missed.map((a) => `${a.endpoint} (${a.error})`).join(", ")}, which proves nothing, so bootstrapping all the same` : ""}`,
      { asked: answers.length, unreachable: missed.length },
    );
  }

  // ------------------------------------------------------------------ etcd

  /** What is on disk, for the data-directory rules. */
  #disk(): DiskFacts {
    const owned = this.#state.etcd;
    return { hasData: hasEtcdData(this.#o.dataDir), owned: owned ?? null, joined: this.#dir.readMarker() !== null };
  }

  /** Refuses to start a data dir this agent did not fill for this cluster and role (before anything is asked of etcd). */
  #checkDataIsOurs(role: Role): void {
    const rule = role === "bootstrap" ? refusalOf(decideDataDir(this.#disk(), { kind: "bootstrap", cluster: this.#o.cluster })) : ownershipRefusal(this.#disk(), this.#o.cluster, role);
    if (rule) throw new Refusal(refusalMessage(this.#where(), rule, role));
  }


  /** Where this node's files are and who it is, for the refusal messages (data-dir-messages.ts). */
  #where(): NodePlace {
    const { node, cluster, brokerUrl, peerURL, dataDir } = this.#o;
    return { node, cluster, brokerUrl, peerURL, dataDir, markerPath: this.#dir.markerPath, statePath: this.#dir.statePath, owned: this.#state.etcd ?? null };
  }

  // ------------------------------------------------------------------ the end

  #writeMarker(view: TicketView, status: EtcdStatus): JoinedMarker {
    return this.#writeMarkerIds(view, status.header.memberId, status.header.clusterId);
  }

  /** IDs in decimal, as etcd's gateway spells them. */
  #writeMarkerIds(view: TicketView, memberId: string, clusterId: string): JoinedMarker {
    const memberID = memberId || view.memberID || this.#state.etcd?.memberID || "";
    const marker: JoinedMarker = {
      version: 1,
      cluster: this.#o.cluster,
      node: this.#o.node,
      peerURL: this.#o.peerURL,
      role: view.role,
      memberID,
      memberIDHex: memberIdHex(memberID),
      clusterID: clusterId ? memberIdHex(clusterId) : null,
      ticket: view.ticket,
      joinedAt: new Date().toISOString(),
    };
    this.#dir.writeMarker(marker);
    return marker;
  }

  /** Announces the join, then (with --etcd-bin) supervises etcd until a signal. */
  async #serve(marker: JoinedMarker): Promise<number> {
    const line = `joined cluster ${marker.clusterID ?? "unknown"} as ${marker.role}`;
    // Progress first: on a terminal it ends the updating line, so stdout's line stands on its own.
    this.#r.event("joined", line, { clusterID: marker.clusterID, memberID: marker.memberID, memberIDHex: memberIdHex(marker.memberID), role: marker.role });
    this.#deps.print(line);
    if (this.#gate) {
      const end = await this.#gate.serve(this.#deps.stop, { role: marker.role, ticket: marker.ticket });
      if (end.code === "ok") return EXIT.ok;
      this.#r.event("gave-up", end.message ?? "the command failed");
      return EXIT.gaveUp;
    }
    if (!this.#ownEtcd.supervisor) return EXIT.ok;
    this.#r.event("running", `supervising etcd (pid ${this.#ownEtcd.supervisor.pid ?? "?"}) until stopped`, { pid: this.#ownEtcd.supervisor.pid });
    const stop = this.#deps.stop;
    const outcome = await Promise.race([untilAborted(stop), this.#ownEtcd.supervisor.failed]);
    if (outcome === "stop") {
      this.#r.event("stopping", "stopping etcd");
      await this.#ownEtcd.supervisor.stop();
      return EXIT.ok;
    }
    this.#r.event("gave-up", this.#ownEtcd.withLogTail(outcome));
    return EXIT.gaveUp;
  }

  /** A marker from an earlier run: the node joined. Without --etcd-bin there is nothing more to do. */
  async #resumeJoined(marker: JoinedMarker): Promise<number> {
    const o = this.#o;
    if (marker.cluster !== o.cluster || marker.node !== o.node) {
      throw new UsageError(`${this.#dir.markerPath} says node ${marker.node} joined cluster ${marker.cluster}; this state dir is not for ${o.node} in ${o.cluster}`);
    }
    if (!this.#ownEtcd.supervisor) return this.#serve(marker);
    if (!hasEtcdData(o.dataDir)) {
      throw new Refusal(
        `${this.#dir.markerPath} says this node joined cluster ${o.cluster}, but ${o.dataDir} holds no etcd data. This node will not start etcd. ${howToRejoin(this.#where(), memberIdHex(marker.memberID))}`,
      );
    }
    this.#r.event("start", `already joined cluster ${marker.clusterID ?? "?"} as ${marker.role}: starting etcd on its data`);
    if (!this.#state.etcd) this.#ownEtcd.record({ role: marker.role, ticket: marker.ticket, initialCluster: [`${o.node}=${o.peerURL}`], initialClusterState: "existing", voter: true });
    this.#ownEtcd.markVoter();
    const status = await this.#withDeadline(async (signal) => {
      await this.#ownEtcd.start(signal);
      return this.#ownEtcd.wait("serving", signal, marker.memberID ? { kind: "member", memberID: marker.memberID, per: `per ${this.#dir.markerPath}` } : undefined);
    });
    const clusterID = memberIdHex(status.header.clusterId);
    if (marker.clusterID && clusterID !== marker.clusterID) {
      this.#r.event("error", `etcd reports cluster ${clusterID}, but the marker says ${marker.clusterID}`);
    }
    return this.#serve({ ...marker, clusterID });
  }

  async #fail(e: unknown): Promise<number> {
    if (!(e instanceof Stopped)) await this.#gate?.stopCommand();
    if (e instanceof Stopped) {
      // Only what this agent runs is stopped; a node still queued runs nothing.
      const running = this.#gate?.commandRunning ? "; stopping the command" : this.#ownEtcd.supervisor?.running ? "; stopping etcd" : "";
      this.#r.event("stopping", `${e.message}${running}. Run the same command again to resume.`);
      await this.#ownEtcd.supervisor?.stop();
      return e.exitCode;
    }
    if (e instanceof UsageError) {
      // Bad usage found only once the broker answered: the turn goes to the next node at once.
      if (!(await this.#stopEtcdUnlessVoter())) await this.#brokerSteps.leave(this.#state?.ticket);
      throw e;
    }
    // A CA that is half there, unreadable, or another than the join API's: the operator must fix it.
    if (e instanceof PkiError) e = new Refusal(`${e.message} (--pki-dir)`);
    if (e instanceof AdmissionRevoked || e instanceof Refusal) {
      const kept = await this.#stopEtcdUnlessVoter();
      // A node that cannot go on (a wrong flag, data that is not its own, a cluster that already
      // runs) gives its turn up at once instead of holding it until its lease ends, unless its etcd
      // keeps running as a voter. A revoked admission has nothing left to give up.
      const left = kept || e instanceof AdmissionRevoked ? "" : await this.#brokerSteps.leave(this.#state?.ticket);
      this.#r.event("refused", `${e.message}${left}${kept}`);
      return EXIT.refused;
    }
    if (e instanceof GaveUp) {
      const kept = await this.#stopEtcdUnlessVoter();
      const left = kept ? "" : await this.#brokerSteps.leave(this.#state?.ticket);
      this.#r.event("gave-up", `${e.message}${left}${kept}`);
      return EXIT.gaveUp;
    }
    const kept = await this.#stopEtcdUnlessVoter();
    this.#r.event("error", `${e instanceof Error ? e.message : String(e)}${kept}`);
    return EXIT.failure;
  }

  /**
   * Giving up: leave the queue (abandon the ticket), so that the slot it holds is free at once
   * rather than when its lease ends, and the nodes behind move on. Also when etcd ran for this
   * ticket: it is stopped by now, and an ended admission is what lets the join API remove its
   * learner for the next node, as a lease's end would (later). Not while this node's etcd keeps
   * running as a voter: the caller keeps the ticket then.
   */
  /**
   * Stops the etcd this agent started, unless it already is a voter: taking a voter down on our
   * own could cost the cluster its quorum. Returns a note for the message when it keeps running.
   */
  async #stopEtcdUnlessVoter(): Promise<string> {
    if (!this.#ownEtcd.supervisor) return "";
    if (!this.#ownEtcd.supervisor.running) {
      // Between restarts: no restart may follow the agent's last word.
      await this.#ownEtcd.supervisor.stop();
      return "";
    }
    const s = this.#ownEtcd.foreignAnswered ? null : await this.#ownEtcd.gateway.status(this.#o.clientURL);
    if (s?.ok && !s.value.isLearner) {
      this.#ownEtcd.supervisor.release();
      return ` etcd (pid ${this.#ownEtcd.supervisor.pid}) is a voting member and keeps running; stop it only after removing the member from the cluster, or run this command again.`;
    }
    await this.#ownEtcd.supervisor.stop();
    return "";
  }

  // ------------------------------------------------------------------ state

  #loadState(): AgentState {
    const o = this.#o;
    const s = this.#dir.readState();
    if (!s) return { version: 1, cluster: o.cluster, node: o.node, peerURL: o.peerURL, updatedAt: new Date().toISOString() };
    if (s.cluster !== o.cluster || s.node !== o.node) {
      throw new UsageError(`state dir ${o.stateDir} belongs to node ${s.node} of cluster ${s.cluster}, not ${o.node} of ${o.cluster}`);
    }
    if (s.peerURL !== o.peerURL && s.etcd) {
      throw new UsageError(`etcd in ${o.dataDir} was started with peer URL ${s.peerURL}; --peer-url ${o.peerURL} does not match it`);
    }
    return { ...s, peerURL: o.peerURL };
  }

  #saveState(patch: Partial<AgentState>): void {
    this.#state = { ...this.#state, ...patch };
    this.#dir.writeState(this.#state);
  }

  /** Runs `work` under the stop signal and the --timeout deadline (which aborts it with GaveUp). */
  async #withDeadline<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const seconds = this.#o.timeoutSeconds;
    if (seconds <= 0) return work(this.#deps.stop);
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new GaveUp(`not joined within --timeout ${seconds} s`)), seconds * 1000);
    try {
      return await work(AbortSignal.any([this.#deps.stop, deadline.signal]));
    } finally {
      clearTimeout(timer);
    }
  }
}

function refusalOf(decision: Decision): RefusalRule | null {
  return decision.action === "refuse" ? decision.rule : null;
}

/** The learner limit the broker asks for, as recorded with the etcd it starts (nothing for the default 1). */
function learnerLimit(view: TicketView): { maxLearners?: number } {
  return view.maxInFlight !== undefined && view.maxInFlight > 1 ? { maxLearners: view.maxInFlight } : {};
}
