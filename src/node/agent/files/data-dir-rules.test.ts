import { describe, expect, it } from "vitest";
import { afterAdd, decideDataDir, keepReason, unwrittenBootstrap, type DiskFacts, type Verdict } from "./data-dir-rules.ts";

const C = "prod";
const empty: DiskFacts = { hasData: false, owned: null, joined: false };
const ownedBootstrap: DiskFacts = { hasData: true, owned: { cluster: C, role: "bootstrap" }, joined: false };
const ownedLearner: DiskFacts = { hasData: true, owned: { cluster: C, role: "join", memberID: "11" }, joined: false };
const ownedVoter: DiskFacts = { hasData: true, owned: { cluster: C, role: "join", memberID: "11", voter: true }, joined: false };
const foreign: DiskFacts = { hasData: true, owned: null, joined: false };

const bootstrap: Verdict = { kind: "bootstrap", cluster: C };
const added = (memberID: string, learner = true, started?: boolean): Verdict => ({
  kind: "added",
  cluster: C,
  memberID,
  learner,
  ...(started === undefined ? {} : { started }),
});
const joined: Verdict = { kind: "joined", cluster: C };
const removed: Verdict = { kind: "removed" };

describe("the data-directory rules: starting etcd", () => {
  it("bootstraps a new cluster only on an empty data dir of a node that never joined", () => {
    expect(decideDataDir(empty, bootstrap)).toEqual({ action: "start", state: "new" });
  });

  it("restarts its own bootstrap data (a crash before complete) instead of making a second cluster", () => {
    expect(decideDataDir(ownedBootstrap, bootstrap)).toEqual({ action: "start", state: "existing", voter: true });
  });

  it("starts a fresh learner as a member of the existing cluster, never as a new cluster", () => {
    expect(decideDataDir(empty, added("11"))).toEqual({ action: "start", state: "existing", voter: false });
    expect(decideDataDir(empty, added("11", true, false))).toEqual({ action: "start", state: "existing", voter: false });
    // A learner that ran once holds no vote: it may start empty and catch up.
    expect(decideDataDir(empty, added("11", true, true))).toEqual({ action: "start", state: "existing", voter: false });
    // A voter that never ran has no raft state to lose.
    expect(decideDataDir(empty, added("11", false, false))).toEqual({ action: "start", state: "existing", voter: true });
  });

  it("restarts its own learner data for the same member, and remembers a voter", () => {
    expect(decideDataDir(ownedLearner, added("11"))).toEqual({ action: "start", state: "existing", voter: false });
    expect(decideDataDir(ownedVoter, added("11"))).toEqual({ action: "start", state: "existing", voter: true });
    expect(decideDataDir(ownedLearner, added("11", false))).toEqual({ action: "start", state: "existing", voter: true });
  });

  it("restarts a joined node's data as a voter when the broker says it joined", () => {
    expect(decideDataDir(ownedVoter, joined)).toEqual({ action: "start", state: "existing", voter: true });
    // An adopted member: the data predates the agent, and etcd already counts it.
    expect(decideDataDir(foreign, joined)).toEqual({ action: "start", state: "existing", voter: true });
  });
});

describe("the data-directory rules: every way to a second cluster is refused", () => {
  it("a node that joined once never bootstraps, even when its data is gone (a restart after the broker lost its state)", () => {
    expect(decideDataDir({ ...empty, joined: true }, bootstrap)).toEqual({ action: "refuse", rule: "joined_never_bootstraps" });
    expect(decideDataDir({ ...ownedVoter, joined: true }, bootstrap)).toEqual({ action: "refuse", rule: "joined_never_bootstraps" });
  });

  it("a joiner's data is never bootstrapped over (the broker reassigned the bootstrap, or was reset)", () => {
    expect(decideDataDir(ownedLearner, bootstrap)).toEqual({ action: "refuse", rule: "role_changed" });
    expect(decideDataDir(ownedVoter, bootstrap)).toEqual({ action: "refuse", rule: "role_changed" });
  });

  it("data this agent did not make is never started, as bootstrap or join", () => {
    expect(decideDataDir(foreign, bootstrap)).toEqual({ action: "refuse", rule: "foreign_data" });
    expect(decideDataDir(foreign, added("11"))).toEqual({ action: "refuse", rule: "foreign_data" });
  });

  it("another cluster's data is never started for this one", () => {
    const other: DiskFacts = { hasData: true, owned: { cluster: "staging", role: "join", memberID: "11" }, joined: false };
    expect(decideDataDir(other, added("11"))).toEqual({ action: "refuse", rule: "other_cluster" });
    expect(decideDataDir({ ...other, owned: { cluster: "staging", role: "bootstrap" } }, bootstrap)).toEqual({ action: "refuse", rule: "other_cluster" });
    expect(decideDataDir(other, joined)).toEqual({ action: "refuse", rule: "other_cluster" });
  });

  it("a bootstrap node's data is never joined to a cluster as a learner", () => {
    expect(decideDataDir(ownedBootstrap, added("11"))).toEqual({ action: "refuse", rule: "role_changed" });
  });

  it("an empty data dir never restarts a voter that has run (a lost disk, a reinstalled node): its term and vote are gone", () => {
    expect(decideDataDir(empty, added("11", false, true))).toEqual({ action: "refuse", rule: "started_voter_without_data" });
    expect(decideDataDir({ ...empty, owned: { cluster: C, role: "join", memberID: "11", voter: true } }, added("11", false, true))).toEqual({
      action: "refuse",
      rule: "started_voter_without_data",
    });
    // A join API that does not say whether the member ran: a voter counts as one that did.
    expect(decideDataDir(empty, added("11", false))).toEqual({ action: "refuse", rule: "started_voter_without_data" });
  });

  it("a node the broker says joined, whose data is gone, starts nothing (neither a new cluster nor an empty member)", () => {
    expect(decideDataDir(empty, joined)).toEqual({ action: "refuse", rule: "joined_without_data" });
    expect(decideDataDir({ ...empty, joined: true }, joined)).toEqual({ action: "refuse", rule: "joined_without_data" });
  });
});

describe("the data-directory rules: moving a removed learner's data aside", () => {
  it("moves aside the data of a learner that was removed, or replaced by a new member for the same peer URL", () => {
    expect(decideDataDir(ownedLearner, removed)).toEqual({ action: "move-aside" });
    expect(decideDataDir(ownedLearner, added("22"))).toEqual({ action: "move-aside" });
  });

  it("never moves aside a voter's, a bootstrap node's, a joined node's or someone else's data", () => {
    expect(decideDataDir(ownedVoter, removed)).toEqual({ action: "refuse", rule: "was_voter" });
    expect(decideDataDir(ownedVoter, added("22"))).toEqual({ action: "refuse", rule: "was_voter" });
    expect(decideDataDir(ownedBootstrap, removed)).toEqual({ action: "refuse", rule: "bootstrapped_here" });
    expect(decideDataDir({ ...ownedLearner, joined: true }, removed)).toEqual({ action: "refuse", rule: "marker_says_joined" });
    expect(decideDataDir({ ...ownedLearner, joined: true }, added("22"))).toEqual({ action: "refuse", rule: "marker_says_joined" });
    expect(decideDataDir(foreign, removed)).toEqual({ action: "refuse", rule: "not_ours" });
  });

  it("keepReason lists the reasons in order of precedence", () => {
    expect(keepReason({ ...ownedVoter, joined: true })).toBe("marker_says_joined");
    expect(keepReason(foreign)).toBe("not_ours");
    expect(keepReason(ownedBootstrap)).toBe("bootstrapped_here");
    expect(keepReason(ownedVoter)).toBe("was_voter");
    expect(keepReason(ownedLearner)).toBeNull();
  });
});

describe("the data-directory rules: bootstrap data raft never wrote to", () => {
  const unwritten: DiskFacts = { ...ownedBootstrap, raftWritten: false };
  it("sets aside only this agent's own bootstrap data for this cluster, with a WAL raft never wrote to, before any join", () => {
    expect(unwrittenBootstrap(unwritten, C)).toBe(true);
    expect(unwrittenBootstrap({ ...unwritten, raftWritten: true }, C)).toBe(false);
    // Not looked at (no WAL read): kept.
    expect(unwrittenBootstrap(ownedBootstrap, C)).toBe(false);
    expect(unwrittenBootstrap({ ...unwritten, hasData: false }, C)).toBe(false);
    expect(unwrittenBootstrap({ ...unwritten, joined: true }, C)).toBe(false);
    expect(unwrittenBootstrap({ ...unwritten, owned: null }, C)).toBe(false);
    expect(unwrittenBootstrap({ ...unwritten, owned: { cluster: "other", role: "bootstrap" } }, C)).toBe(false);
    // A joiner's raft learns its members from the leader: its empty WAL is not stuck.
    expect(unwrittenBootstrap({ ...ownedLearner, raftWritten: false }, C)).toBe(false);
  });
});

describe("after an add: refuse, or start etcd for the member added", () => {
  const member = (memberID: string, learner = true, started?: boolean) => ({ cluster: C, memberID, learner, ...(started === undefined ? {} : { started }) });

  it("starts a fresh or resumed learner as it is, and a member that was a voter here as a voter", () => {
    expect(afterAdd(empty, member("11"))).toEqual({ action: "start", discardOwned: false, voter: false });
    expect(afterAdd(ownedLearner, member("11"))).toEqual({ action: "start", discardOwned: false, voter: false });
    expect(afterAdd(ownedVoter, member("11"))).toEqual({ action: "start", discardOwned: false, voter: true });
    expect(afterAdd(ownedLearner, member("11", false))).toEqual({ action: "start", discardOwned: false, voter: true });
  });

  it("discards the data of a removed learner when the join API added this node anew", () => {
    expect(afterAdd(ownedLearner, member("12"))).toEqual({ action: "start", discardOwned: true, voter: false });
  });

  it("leaves a voter's or a joined node's data to the discard, which refuses it naming the member added", () => {
    expect(afterAdd(ownedVoter, member("12"))).toEqual({ action: "start", discardOwned: true, voter: false });
    expect(afterAdd({ ...ownedLearner, joined: true }, member("12"))).toEqual({ action: "start", discardOwned: true, voter: false });
  });

  it("refuses data that is not this agent's, and a started voter without data", () => {
    expect(afterAdd(foreign, member("11"))).toEqual({ action: "refuse", rule: "foreign_data" });
    expect(afterAdd(ownedBootstrap, member("11"))).toEqual({ action: "refuse", rule: "role_changed" });
    expect(afterAdd(empty, member("11", false, true))).toEqual({ action: "refuse", rule: "started_voter_without_data" });
  });
});
