/**
 * The end state every scenario must reach, asserted on what etcd and the broker report.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import { catchUpFacts } from "../../src/node/etcd/etcd-log.ts";
import type { ClusterHarness } from "./cluster.ts";

/** etcd 3.6+ takes an in-memory snapshot past this many applied entries and compacts the log behind it. */
const SNAPSHOT_THRESHOLD = 100;

/**
 * Every named node serves the same member list and cluster ID: exactly these nodes, all started
 * voters (no learner left), and each node healthy. A node that had bootstrapped a cluster of
 * its own would show another cluster ID or a member list of one.
 */
export async function expectOneHealthyCluster(
  h: ClusterHarness,
  names: string[],
): Promise<{ clusterId: string; memberCount: number; ids: Map<string, string> }> {
  const views = await settledViews(h, names);
  const clusterIds = new Set(views.map((v) => v.clusterId));
  expect([...clusterIds], "one cluster ID across all nodes").toHaveLength(1);
  const ids = new Map<string, string>();
  for (const v of views) {
    expect(v.members.map((m) => m.name).sort(), `member names as seen by ${v.node}`).toEqual([...names].sort());
    expect(
      v.members.filter((m) => m.isLearner).map((m) => m.name),
      `learners as seen by ${v.node}`,
    ).toEqual([]);
    expect(
      v.members.every((m) => m.started),
      `every member started, as seen by ${v.node}`,
    ).toBe(true);
    expect(v.healthy, `${v.node} reports /health true`).toBe(true);
    for (const m of v.members) {
      if (ids.has(m.name)) expect(ids.get(m.name), `member ID of ${m.name}`).toBe(m.id);
      ids.set(m.name, m.id);
    }
  }
  return { clusterId: views[0]!.clusterId, memberCount: views[0]!.members.length, ids };
}

/**
 * The broker's audit log: one bootstrap, every node admitted at least once and joined exactly
 * once, with the etcd member ID it really has.
 */
export async function expectEveryAdmissionAudited(h: ClusterHarness, names: string[], memberIds?: Map<string, string>): Promise<void> {
  const audit = await h.audit();
  expect(
    audit.filter((a) => a.action === "cluster.bootstrapped"),
    "one cluster.bootstrapped",
  ).toHaveLength(1);
  for (const name of names) {
    const admitted = audit.filter((a) => a.action === "ticket.admitted" && a.detail.node === name);
    expect(admitted.length, `${name} admitted at least once`).toBeGreaterThanOrEqual(1);
    const joined = audit.filter((a) => a.action === "ticket.joined" && a.detail.node === name);
    expect(joined, `${name} joined exactly once`).toHaveLength(1);
    if (memberIds) expect(String(joined[0]!.detail.memberID), `${name}'s reported member ID`).toBe(memberIds.get(name));
  }
}

/**
 * The end of a run with faults: one healthy cluster of these nodes, each node's last agent said
 * it joined that cluster, exactly one node ever bootstrapped (over every run, restarts included),
 * and the audit log agrees.
 */
export async function expectJoinedOnceDespiteFaults(h: ClusterHarness, names: string[]): ReturnType<typeof expectOneHealthyCluster> {
  const final = await expectOneHealthyCluster(h, names);
  for (const n of names) expect(h.current(n)!.stdout).toMatch(new RegExp(`^joined cluster ${final.clusterId} as (bootstrap|join)$`, "m"));
  const bootstrappers = names.filter((n) => (h.runs.get(n) ?? []).some((r) => /as bootstrap$/m.test(r.stdout)));
  expect(bootstrappers).toHaveLength(1);
  await expectEveryAdmissionAudited(h, names, final.ids);
  return final;
}

/**
 * The nodes' views once they agree (or the last ones after 30 s): a follower applies the last
 * promote a moment after the leader, and a busy machine stretches that moment.
 */
async function settledViews(h: ClusterHarness, names: string[]): Promise<Awaited<ReturnType<ClusterHarness["finalViews"]>>> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const views = await h.finalViews(names).catch((e: unknown) => (Date.now() < deadline ? null : Promise.reject(e)));
    const settled =
      views !== null &&
      new Set(views.map((v) => v.clusterId)).size === 1 &&
      views.every((v) => v.healthy && v.members.length === names.length && v.members.every((m) => m.started && !m.isLearner));
    if (views && (settled || Date.now() >= deadline)) return views;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * What the joins cost etcd, from etcd itself, in counts that load does not move: the join API's
 * records are one KV write per admission (the store's revision starts at 1), the raft log stays
 * below etcd 3.6's snapshot threshold, and so no member was sent a snapshot. A member that joins
 * from a snapshot may find its own publish inside it and wait out etcd's 7 s request timeout
 * (docs/etcd-versions.md); a join API that wrote on every retry of a held add pushed a cluster
 * of seven past the threshold.
 */
export async function expectNoSnapshotCatchUp(h: ClusterHarness, names: string[]): Promise<{ revision: number; raftIndex: number }> {
  let revision = 0;
  let raftIndex = 0;
  for (const node of h.nodes.filter((n) => names.includes(n.name))) {
    const status = await h.etcd(node.clientURL, 5_000).status(node.clientURL);
    if (!status.ok) continue;
    revision = Math.max(revision, Number(status.value.header.revision));
    raftIndex = Math.max(raftIndex, Number(status.value.raftIndex));
  }
  // With TLS (--pki-dir) the bootstrap node also records its own certificates, once.
  const ownRecord = h.pkiCaDir ? 1 : 0;
  expect(revision, "etcd's KV revision: one record write per joiner at most").toBeGreaterThanOrEqual(1);
  expect(revision - 1, "KV writes (the join API's learner records, the bootstrap node's own record)").toBeLessThanOrEqual(names.length - 1 + ownRecord);
  expect(raftIndex, "raft entries, below etcd 3.6's in-memory snapshot threshold").toBeLessThan(SNAPSHOT_THRESHOLD);
  for (const node of h.nodes.filter((n) => names.includes(n.name))) {
    const facts = catchUpFacts(readFileSync(join(node.stateDir, "etcd.log"), "utf8"));
    expect(facts.snapshotsReceived, `snapshots sent to ${node.name} ("${"received and saved database snapshot"}" in its etcd log)`).toBe(0);
  }
  return { revision, raftIndex };
}
