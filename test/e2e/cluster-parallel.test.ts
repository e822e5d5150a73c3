/**
 * Scenario 1: one bootstrap node and six joiners, all started at the same moment, end as one
 * etcd cluster of seven voters: one cluster ID on every node, no learner left, exactly one
 * bootstrap.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { ClusterHarness } from "../support/cluster.ts";
import { e2eSeed } from "../support/seeded.ts";
import { expectOneHealthyCluster, expectEveryAdmissionAudited, expectNoSnapshotCatchUp } from "../support/cluster-assertions.ts";

const NODES = ["ctrl-0", "ctrl-1", "ctrl-2", "ctrl-3", "ctrl-4", "ctrl-5", "ctrl-6"];
let h: ClusterHarness;
const summary: Record<string, unknown> = {};

beforeAll(async () => {
  h = await ClusterHarness.start({ scenario: "parallel", seed: e2eSeed("parallel"), nodes: NODES });
});

afterAll(async () => {
  // Written whatever the outcome: a failed run's timeline is the one worth reading.
  h?.writeTimeline(summary);
  await h?.cleanup();
});

// Waits for six joins one at a time, each learner promoted once etcd's leader has seen every
// voter for 5 s.
it("1 + 6 controllers started at once form one cluster of 7 voters", async () => {
  h.startSampling();
  const started = Date.now();
  for (const n of NODES) h.startAgent(n);
  await h.waitFor("every agent to report joined", () => NODES.every((n) => h.joined(n)), 240_000);
  const took = Date.now() - started;
  h.stopSampling();

  const final = await expectOneHealthyCluster(h, NODES);
  const roles = NODES.map((n) => /as (bootstrap|join)$/m.exec(h.current(n)!.stdout)?.[1]);
  expect(roles.filter((r) => r === "bootstrap")).toHaveLength(1);
  for (const n of NODES) expect(h.current(n)!.stdout).toContain(`joined cluster ${final.clusterId} as `);
  await expectEveryAdmissionAudited(h, NODES, final.ids);
  // What the joins cost etcd: one record write per joiner, a raft log too short for etcd 3.6+ to
  // send any member a snapshot (whose own publish could then wait out etcd's 7 s request timeout).
  const cost = await expectNoSnapshotCatchUp(h, NODES);

  // A signal stops each agent and its etcd cleanly.
  const exits = await Promise.all(NODES.map((n) => h.stop(n)));
  expect(exits.map((x) => x.code)).toEqual(NODES.map(() => 0));
  Object.assign(summary, { ...cost, tookMs: took, clusterId: final.clusterId, members: final.memberCount });
}, 300_000);
