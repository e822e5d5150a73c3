/**
 * The split-brain guard as pure functions: given what is on disk (etcd data, the agent's record
 * of what it did to the data dir, the "joined" marker) and what the broker or etcd says, whether
 * etcd starts a `new` cluster, starts on `existing` data (or as a new member of an existing
 * cluster), moves a removed learner's data aside, or refuses. No I/O here: the agent gathers the
 * facts (node-files.ts) and every rule is unit-tested (data-dir-rules.test.ts).
 * @module
 */
import type { Role } from "../../../shared/protocol/wire.ts";

/** What is on disk. */
export interface DiskFacts {
  /** etcd's write-ahead log exists in the data dir (etcd would restart on it). */
  hasData: boolean;
  /**
   * With data: whether etcd's raft wrote to it (etcd-wal.ts). false only for a WAL etcd made but
   * raft never wrote to (etcd killed within its first start); undefined when not looked at.
   */
  raftWritten?: boolean;
  /** What this agent recorded before it first started etcd there; null when it never did. */
  owned: { cluster: string; role: Role; memberID?: string; voter?: boolean } | null;
  /** The "joined" marker exists: this node completed its join once. */
  joined: boolean;
}

/** What the other side says, at the point the agent decides. */
export type Verdict =
  /** The broker admitted this node with the cluster's one bootstrap ticket. */
  | { kind: "bootstrap"; cluster: string }
  /**
   * The join API added (or found) this node's member, learner or not. `started`: the member has
   * run already; unknown (a join API that predates the field) counts as started for a voter.
   */
  | { kind: "added"; cluster: string; memberID: string; learner: boolean; started?: boolean }
  /** The broker says this node already joined (a crash after `complete`, or an adopted member). */
  | { kind: "joined"; cluster: string }
  /** etcd or the join API says this node's member was removed from the cluster. */
  | { kind: "removed" };

/** Why data is refused or kept; stable codes the agent turns into its messages. */
export type RefusalRule =
  /** There is data, but this agent never started etcd on it (another cluster's, another tool's). */
  | "foreign_data"
  /** The data belongs to another cluster than the one asked for. */
  | "other_cluster"
  /** The data was made in the other role (bootstrap vs join) than the broker now asks for. */
  | "role_changed"
  /** This node joined once (marker): it never bootstraps again. */
  | "joined_never_bootstraps"
  /** The broker says joined, but the data is gone: neither a new cluster nor an empty member. */
  | "joined_without_data"
  /**
   * The join API found this node's member a voter that has run, but the data dir is empty: etcd
   * would start that voter with no raft state (its term and vote lost), and could vote twice.
   */
  | "started_voter_without_data"
  /** Data that must never be moved aside automatically (see `keepReason`). */
  | KeepReason;

export type KeepReason = "marker_says_joined" | "not_ours" | "bootstrapped_here" | "was_voter";

export type Decision =
  | { action: "start"; state: "new" }
  | { action: "start"; state: "existing"; voter: boolean }
  | { action: "move-aside" }
  | { action: "refuse"; rule: RefusalRule };

/**
 * Why this data dir must never be moved aside automatically; null when it may be: only a learner
 * this agent added for a join, that never became a voter and never completed, holds nothing the
 * cluster lacks.
 */
export function keepReason(disk: DiskFacts): KeepReason | null {
  if (disk.joined) return "marker_says_joined";
  if (!disk.owned) return "not_ours";
  if (disk.owned.role !== "join") return "bootstrapped_here";
  if (disk.owned.voter) return "was_voter";
  return null;
}

/**
 * Whether data on disk was made by this agent, for this cluster, in this role: null when there
 * is none or it was; the refusal otherwise. Checked before the join API is asked to add a member.
 */
export function ownershipRefusal(disk: DiskFacts, cluster: string, role: Role): RefusalRule | null {
  return disk.hasData ? ownership(disk, cluster, role) : null;
}

function ownership(disk: DiskFacts, cluster: string, role: Role): RefusalRule | null {
  if (!disk.owned) return "foreign_data";
  if (disk.owned.cluster !== cluster) return "other_cluster";
  if (disk.owned.role !== role) return "role_changed";
  return null;
}

/** What to do with the data dir. */
export function decideDataDir(disk: DiskFacts, verdict: Verdict): Decision {
  switch (verdict.kind) {
    case "bootstrap": {
      if (disk.joined) return { action: "refuse", rule: "joined_never_bootstraps" };
      if (!disk.hasData) return { action: "start", state: "new" };
      const refused = ownership(disk, verdict.cluster, "bootstrap");
      // Our own bootstrap data (a restart before `complete`): etcd restarts on it.
      return refused ? { action: "refuse", rule: refused } : { action: "start", state: "existing", voter: true };
    }
    case "added": {
      if (!disk.hasData) {
        // A learner never votes, so one with lost data may start empty and catch up; a voter may not.
        if (!verdict.learner && verdict.started !== false) return { action: "refuse", rule: "started_voter_without_data" };
        return { action: "start", state: "existing", voter: !verdict.learner };
      }
      const refused = ownership(disk, verdict.cluster, "join");
      if (refused) return { action: "refuse", rule: refused };
      if (disk.owned!.memberID && disk.owned!.memberID !== verdict.memberID) {
        // Peer URLs are unique in etcd: the member this data was made for is gone, and etcd
        // refuses its data ("permanently removed"). Only a learner's data may go.
        const keep = keepReason(disk);
        return keep ? { action: "refuse", rule: keep } : { action: "move-aside" };
      }
      return { action: "start", state: "existing", voter: !verdict.learner || disk.owned!.voter === true };
    }
    case "joined": {
      if (!disk.hasData) return { action: "refuse", rule: "joined_without_data" };
      if (disk.owned && disk.owned.cluster !== verdict.cluster) return { action: "refuse", rule: "other_cluster" };
      return { action: "start", state: "existing", voter: true };
    }
    case "removed": {
      // Whether or not etcd wrote anything yet: the rules of what may go are the same.
      const keep = keepReason(disk);
      return keep ? { action: "refuse", rule: keep } : { action: "move-aside" };
    }
  }
}

/**
 * Whether this agent's own bootstrap data holds nothing at all and must be set aside before etcd
 * starts: etcd was killed in its first start after making its WAL and before raft wrote the
 * cluster's first member to it. Restarted on it, etcd knows no voter and never elects a leader;
 * nothing was ever committed there, and no other node can have joined a cluster that never had
 * one. A joiner's empty WAL is left alone: its raft learns everything from the leader.
 */
export function unwrittenBootstrap(disk: DiskFacts, cluster: string): boolean {
  return disk.hasData && disk.raftWritten === false && !disk.joined && disk.owned?.role === "bootstrap" && disk.owned.cluster === cluster;
}

/** The join API's answer to an add, as far as the data dir is concerned. */
export interface AddedMember {
  cluster: string;
  memberID: string;
  learner: boolean;
  started?: boolean;
}

export type AfterAdd =
  | { action: "refuse"; rule: RefusalRule }
  /**
   * `discardOwned`: the data dir was made for another member, which etcd removed; its data goes
   * first (moving it aside refuses a voter's or a joined node's data, naming the member added).
   * `voter`: the member added is a voter, or one this data dir already served as a voter.
   */
  | { action: "start"; discardOwned: boolean; voter: boolean };

/** What follows an add: refuse at once, or start etcd for the member added (after discarding a removed learner's data). */
export function afterAdd(disk: DiskFacts, added: AddedMember): AfterAdd {
  const decision = decideDataDir(disk, { kind: "added", ...added });
  if (decision.action === "refuse" && decision.rule !== "was_voter" && decision.rule !== "marker_says_joined") return { action: "refuse", rule: decision.rule };
  const owned = disk.owned;
  return {
    action: "start",
    discardOwned: decision.action !== "start" && Boolean(owned?.memberID),
    voter: added.learner === false || (owned?.memberID === added.memberID && owned.voter === true),
  };
}
