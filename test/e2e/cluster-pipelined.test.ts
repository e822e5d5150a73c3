/**
 * Pipelined admission, whole cluster: on etcd 3.6 or later, one bootstrap node and six joiners
 * started at once with the policy's maxInFlight 6. The agents start etcd with `--max-learners 6`
 * (from the ticket view, no agent flag), the join API holds several learners at once and promotes
 * them as they catch up. The end is the same as the serial join: one cluster of seven voters.
 * Along the way: never more than maxInFlight learners, and more than one at some moment.
 *
 * Runs on $E2E_ETCD_VERSION when that is 3.6 or later, else on 3.6.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startPipelinedCluster, type ClusterHarness } from "../support/cluster.ts";
import { MULTI_LEARNER_VERSION as VERSION } from "../support/etcd.ts";
import { expectOneHealthyCluster, expectEveryAdmissionAudited, expectNoSnapshotCatchUp } from "../support/cluster-assertions.ts";

const NODES = ["ctrl-0", "ctrl-1", "ctrl-2", "ctrl-3", "ctrl-4", "ctrl-5", "ctrl-6"];
const MAX_IN_FLIGHT = 6;
let h: ClusterHarness;
const summary: Record<string, unknown> = { etcd: VERSION };

beforeAll(async () => {
  h = await startPipelinedCluster("pipelined", NODES, MAX_IN_FLIGHT);
}, 600_000);

afterAll(async () => {
  h?.writeTimeline(summary);
  await h?.cleanup();
});

/** Learners over time, replayed from the join API's own log of the changes it made, in order. */
function learnerCounts(joinApiOutput: string): number[] {
  const counts: number[] = [];
  let learners = 0;
  for (const line of joinApiOutput.split("\n")) {
    if (/added learner [0-9a-f]+ /.test(line)) learners++;
    else if (/promoted learner [0-9a-f]+ |removed (started|unstarted) learner [0-9a-f]+ /.test(line)) learners--;
    else continue;
    counts.push(learners);
  }
  return counts;
}

// Waits for six learners to catch up and be promoted, several at once, each once etcd's leader
// has seen every voter for 5 s.
it(`1 + 6 controllers with maxInFlight ${MAX_IN_FLIGHT} join with several learners at once`, async () => {
  // etcd's own view, every 100 ms: the number of learners it holds.
  const gateways = h.nodes.map((n) => h.etcd(n.clientURL, 500));
  let maxSeen = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      for (const g of gateways) {
        const list = await g.memberList();
        if (!list.ok) continue;
        maxSeen = Math.max(maxSeen, list.value.members.filter((m) => m.isLearner).length);
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();

  h.startSampling();
  const started = Date.now();
  for (const n of NODES) h.startAgent(n);
  try {
    await h.waitFor("every agent to report joined", () => NODES.every((n) => h.joined(n)), 240_000);
  } finally {
    sampling = false;
    await sampler;
    h.stopSampling();
  }
  const took = Date.now() - started;

  const final = await expectOneHealthyCluster(h, NODES);
  expect(final.memberCount).toBe(NODES.length);
  await expectEveryAdmissionAudited(h, NODES, final.ids);
  // What the joins cost etcd: one record write per joiner, a raft log too short for etcd 3.6+ to
  // send any member a snapshot (whose own publish could then wait out etcd's 7 s request timeout).
  const cost = await expectNoSnapshotCatchUp(h, NODES);

  // Every agent started etcd with the broker's maxInFlight as its learner limit.
  for (const n of h.nodes) {
    const flags = readFileSync(join(n.stateDir, "etcd-flags.txt"), "utf8").split("\n");
    expect(flags, `${n.name}'s etcd flags`).toContain(`--max-learners=${MAX_IN_FLIGHT}`);
  }

  // Several learners at once, never more than maxInFlight: from the join API's ordered log of the
  // changes it made, and from etcd's member lists.
  const counts = learnerCounts(h.joinApi.output());
  expect(h.joinApi.output().match(/added learner [0-9a-f]+ /g), "one learner added per joiner").toHaveLength(NODES.length - 1);
  expect(Math.max(...counts), `learners at once (join API log: ${counts.join(" ")})`).toBeGreaterThan(1);
  expect(Math.max(...counts)).toBeLessThanOrEqual(MAX_IN_FLIGHT);
  expect(maxSeen).toBeLessThanOrEqual(MAX_IN_FLIGHT);
  expect(counts[counts.length - 1]).toBe(0);

  const exits = await Promise.all(NODES.map((n) => h.stop(n)));
  expect(exits.map((x) => x.code)).toEqual(NODES.map(() => 0));
  Object.assign(summary, { ...cost, tookMs: took, clusterId: final.clusterId, maxLearnersLogged: Math.max(...counts), maxLearnersSampled: maxSeen });
}, 600_000);
