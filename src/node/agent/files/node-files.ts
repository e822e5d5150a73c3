/**
 * What the agent keeps on this node, as the join's steps read and write it: its progress
 * (`agent-state.json`: ticket, role, what it did to the data dir), the facts the data-directory
 * rules decide on, and the "joined" marker. The files themselves are state-files.ts's.
 * @module
 */
import { memberIdHex } from "../../../shared/protocol/member-id.ts";
import type { Role, TicketView } from "../../../shared/protocol/wire.ts";
import { UsageError } from "../../exit-codes.ts";
import { decideDataDir, ownershipRefusal, type DiskFacts, type RefusalRule } from "./data-dir-rules.ts";
import { refusalMessage, type NodePlace } from "./data-dir-messages.ts";
import { Refusal } from "../core/errors.ts";
import type { AgentOptions } from "../core/agent-options.ts";
import { raftWroteData } from "./etcd-wal.ts";
import { hasEtcdData, type AgentState, type EtcdOwnership, type JoinedMarker, type StateDir } from "./state-files.ts";

export class NodeFiles {
  readonly dir: StateDir;
  readonly #o: AgentOptions;
  #state: AgentState | undefined;

  constructor(options: AgentOptions, dir: StateDir) {
    this.#o = options;
    this.dir = dir;
  }

  /** Reads the progress an earlier run left; refuses a state dir that belongs to another node, cluster or peer URL. */
  load(): void {
    const o = this.#o;
    const s = this.dir.readState();
    if (!s) {
      this.#state = { version: 1, cluster: o.cluster, node: o.node, peerURL: o.peerURL, updatedAt: new Date().toISOString() };
      return;
    }
    if (s.cluster !== o.cluster || s.node !== o.node) {
      throw new UsageError(`state dir ${o.stateDir} belongs to node ${s.node} of cluster ${s.cluster}, not ${o.node} of ${o.cluster}`);
    }
    if (s.peerURL !== o.peerURL && s.etcd) {
      throw new UsageError(`etcd in ${o.dataDir} was started with peer URL ${s.peerURL}; --peer-url ${o.peerURL} does not match it`);
    }
    this.#state = { ...s, peerURL: o.peerURL };
  }

  /** The ticket this node holds, if any (also before load, when a run ends early). */
  get ticket(): string | undefined {
    return this.#state?.ticket;
  }

  /** What this agent recorded of the etcd it started on the data dir. */
  get owned(): EtcdOwnership | undefined {
    return this.#state?.etcd;
  }

  save(patch: Partial<AgentState>): void {
    this.#state = { ...this.#state!, ...patch };
    this.dir.writeState(this.#state);
  }

  /** What is on disk, for the data-directory rules. */
  disk(): DiskFacts {
    const hasData = hasEtcdData(this.#o.dataDir);
    return {
      hasData,
      ...(hasData ? { raftWritten: raftWroteData(this.#o.dataDir) } : {}),
      owned: this.owned ?? null,
      joined: this.dir.readMarker() !== null,
    };
  }

  /** Where this node's files are and who it is, for the refusal messages (data-dir-messages.ts). */
  where(): NodePlace {
    const { node, cluster, brokerUrl, peerURL, dataDir } = this.#o;
    return { node, cluster, brokerUrl, peerURL, dataDir, markerPath: this.dir.markerPath, statePath: this.dir.statePath, owned: this.owned ?? null };
  }

  refusal(rule: RefusalRule, role: Role, why?: string): string {
    return refusalMessage(this.where(), rule, role, why);
  }

  /** Refuses to start a data dir this agent did not fill for this cluster and role (before anything is asked of etcd). */
  checkDataIsOurs(role: Role): void {
    const disk = this.disk();
    const decision = role === "bootstrap" ? decideDataDir(disk, { kind: "bootstrap", cluster: this.#o.cluster }) : null;
    const rule = decision ? (decision.action === "refuse" ? decision.rule : null) : ownershipRefusal(disk, this.#o.cluster, role);
    if (rule) throw new Refusal(this.refusal(rule, role));
  }

  /**
   * The node joined: the marker every later run starts from. IDs in decimal, as etcd's gateway
   * spells them; a member ID etcd did not give is the broker's, then the one this agent recorded.
   */
  writeMarker(view: TicketView, memberId: string, clusterId: string): JoinedMarker {
    const memberID = memberId || view.memberID || this.owned?.memberID || "";
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
    this.dir.writeMarker(marker);
    return marker;
  }
}
