/**
 * This node's member as etcd lists it, in gate mode: found by its peer URL in the member list
 * that `--etcd` (with its TLS files) answers, each change reported once, and the split brain the
 * broker exists to prevent refused: an installer that started a cluster of its own.
 *
 * A joiner's member counts as started (the start rule's report) once its etcd runs as a member of
 * this cluster: etcd lists it with a name, or, earlier, its peer URL answers. etcd serves its peer
 * URL only after it compared its `--initial-cluster` with the cluster's (where "member count is
 * unequal" stops it) and started raft; its name comes only with its first published entry, which
 * on etcd 3.6+ can wait 7 s for a member sent a snapshot (docs/etcd-versions.md).
 *
 * An installer's own clean-up must not keep the agent from asking: `kubeadm reset -f` deletes
 * `/etc/kubernetes/pki`, where the recipe's `--etcd-cert` lives. So the agent keeps a copy of the
 * last working client certificate in its state dir and uses it while the files are gone.
 * @module
 */
import { join } from "node:path";
import { memberIdHex } from "../../../shared/protocol/member-id.ts";
import { EtcdGateway, memberByPeerUrl, type EtcdMember } from "../../etcd/gateway.ts";
import { tlsFetch } from "../../etcd/tls-fetch.ts";
import type { AgentOptions } from "../core/agent-options.ts";
import type { Reporter } from "../core/progress.ts";
import type { StateDir } from "../files/state-files.ts";
import type { Voter } from "../steps/member-runner.ts";
import { SplitBrain } from "./gate-errors.ts";

/** Where the agent keeps its copy of etcd's client certificate, in its state dir. */
export const KEPT_ETCD_CLIENT_DIR = "etcd-client";

/** How long the probe of this node's own peer URL may take (it runs between two member lists). */
const PEER_PROBE_MS = 500;

export class OwnMember {
  readonly #o: AgentOptions;
  readonly #r: Reporter;
  readonly etcd: EtcdGateway;
  /** What was last reported about this node's member, so that each change is logged once ("": not a member). */
  #seen = "";
  /** The role the broker gave this node's current ticket. */
  role: string | null = null;
  /** This node's member once it started (its etcd runs as a member, or etcd lists it with a name), during the current admission. */
  started: string | null = null;
  /** The etcd cluster ID of the first member list that showed other members than this node (decimal). */
  #cluster: string | null = null;
  /** How this node's own peer URL is asked (the `--etcd` TLS files: etcd's CA signs peer and client certificates alike). */
  readonly #peerFetch: typeof fetch;

  constructor(options: AgentOptions, reporter: Reporter, dir: StateDir) {
    this.#o = options;
    this.#r = reporter;
    const keep = {
      dir: join(dir.path, KEPT_ETCD_CLIENT_DIR),
      onStandIn: (missing: string) =>
        reporter.event(
          "etcd-exit",
          `${missing} is gone (an installer's clean-up?): etcd is asked with the copy of the client certificate kept in ${join(dir.path, KEPT_ETCD_CLIENT_DIR)}`,
        ),
    };
    const tls = options.etcdTls ? tlsFetch(options.etcdTls, keep) : null;
    this.#peerFetch = tls && options.peerURL.startsWith("https:") ? tls : fetch;
    this.etcd = new EtcdGateway(options.etcdEndpoints, { timeoutMs: 3_000, ...(tls ? { fetch: tls } : {}) });
  }

  /** What etcd last showed of this node's member, in words ("": not a member). */
  get seen(): string {
    return this.#seen;
  }

  /** This node as a started voter in etcd's member list, or null (also when etcd cannot be reached). */
  async findVoter(): Promise<Voter | null> {
    const list = await this.etcd.memberList();
    if (!list.ok) return null;
    const own = this.own(list.value.members);
    const seen = !own
      ? ""
      : own.isLearner
        ? own.started
          ? "a started learner"
          : "a learner, not started"
        : own.started
          ? "a started voter"
          : "a voter, not started";
    if (own && seen !== this.#seen) {
      const fields = { memberID: own.id, learner: own.isLearner, started: own.started };
      if (!this.#seen) this.#r.event("member-added", `etcd lists this node as member ${memberIdHex(own.id)}: ${seen}`, fields);
      else if (own.isLearner || !own.started) this.#r.event("etcd-ready", `member ${memberIdHex(own.id)} is now ${seen}`, fields);
      if (!own.isLearner && own.started) this.#r.event("promoted", `a voter: member ${memberIdHex(own.id)}`, fields);
    }
    this.#seen = seen;
    if (own?.started) this.started = own.id;
    else if (own && this.role === "join" && this.started === null && (await this.#peerServesMember(own.id))) {
      this.started = own.id;
      this.#r.event("etcd-ready", `member ${memberIdHex(own.id)} runs: its etcd answers on ${this.#o.peerURL}, its name not yet published`, {
        memberID: own.id,
        learner: own.isLearner,
        started: false,
      });
    }
    const clusterID = list.value.header.clusterId;
    const others = list.value.members.filter((m) => m !== own);
    if (others.length > 0) this.#cluster ??= clusterID;
    if (!own || own.isLearner || !own.started) return null;
    // The failure the broker exists to prevent (k0s issue #5149): an installer that decided on
    // its own to start a new cluster. Never report that as a join.
    if (this.role === "join" && others.length === 0) {
      throw new SplitBrain(
        `the broker told this node to join, but etcd at ${list.endpoint} lists it as the only member of cluster ${memberIdHex(clusterID)}: ` +
          `its installer started a new cluster of its own (split brain). Stop it, remove its etcd data, and run this command again with a recipe that joins when JOIN_BROKER_ROLE=join.`,
      );
    }
    if (this.#cluster && clusterID !== this.#cluster) {
      throw new SplitBrain(
        `etcd at ${list.endpoint} lists this node as a voter of cluster ${memberIdHex(clusterID)}, but the cluster it was to join is ${memberIdHex(this.#cluster)} (split brain). ` +
          `Stop its installer, remove its etcd data, and run this command again.`,
      );
    }
    return { memberID: own.id, clusterID };
  }

  /**
   * Whether this node's etcd serves its peer URL as a member of this cluster: its `/members` (the
   * member list as that etcd holds it) names `memberID`, so no etcd left from an earlier attempt
   * counts. A TLS listener that etcd does not serve yet never completes the handshake.
   */
  async #peerServesMember(memberID: string): Promise<boolean> {
    try {
      const res = await this.#peerFetch(`${this.#o.peerURL.replace(/\/+$/, "")}/members`, { signal: AbortSignal.timeout(PEER_PROBE_MS), redirect: "error" });
      // IDs are JSON numbers past 2^53: compared as the digits etcd wrote.
      const body = await res.text();
      return res.ok && new RegExp(`"id":${memberID}[,}]`).test(body);
    } catch {
      return false;
    }
  }

  own(members: readonly EtcdMember[]): EtcdMember | undefined {
    return memberByPeerUrl(members, this.#o.peerURL);
  }
}
