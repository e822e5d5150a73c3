/**
 * Gate mode, scenario 1: seven nodes whose installer knows nothing of the broker (the test
 * installer does kubeadm's etcd phase with the real etcdctl) are started at the same moment,
 * each behind `join-broker join --exec`. The broker's role picks `init` for one and `join` for
 * the rest; the agents run one installer at a time. The end: one cluster ID on every node,
 * seven started voters, never more than one member that is not a voter, and no installer ever
 * told by etcd that another node's learner is in the way.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { ClusterHarness } from "../support/cluster.ts";
import { expectEveryAdmissionAudited, expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { expectClientCertificateRequired, installerCommand, NonVoterWatch, overlappingWindows } from "../support/gate.ts";
import { e2eSeed } from "../support/seeded.ts";

const NODES = ["ctrl-0", "ctrl-1", "ctrl-2", "ctrl-3", "ctrl-4", "ctrl-5", "ctrl-6"];
let h: ClusterHarness;
const summary: Record<string, unknown> = {};

beforeAll(async () => {
  h = await ClusterHarness.start({ scenario: "gate-parallel", seed: e2eSeed("gate-parallel"), nodes: NODES });
});

afterAll(async () => {
  h?.writeTimeline(summary);
  await h?.cleanup();
});

// Waits for six installers one at a time, each admitted once the one before is a started voter.
it("1 + 6 unmodified installers started at once form one cluster of 7 voters, one installer at a time", async () => {
  const watch = new NonVoterWatch(h);
  watch.start();
  h.startSampling();
  const started = Date.now();
  for (const name of NODES) {
    const node = h.node(name);
    h.startAgent(name, { args: h.gateAgentArgs(node, await installerCommand(h, node)) });
  }
  await h.waitFor("every agent to report joined", () => NODES.every((n) => h.joined(n)), 300_000);
  const took = Date.now() - started;
  // An installer that exits once the node is a voter: its agent exits 0 after it.
  const exits = await Promise.all(NODES.map((n) => h.current(n)!.exited));
  watch.stop();
  h.stopSampling();
  expect(
    exits.map((x) => x.code),
    h.describeAgents(),
  ).toEqual(NODES.map(() => 0));

  const final = await expectOneHealthyCluster(h, NODES);
  const roles = NODES.map((n) => /^joined cluster \S+ as (bootstrap|join)$/m.exec(h.current(n)!.stdout)?.[1]);
  expect(roles.filter((r) => r === "bootstrap")).toHaveLength(1);
  for (const n of NODES) expect(h.current(n)!.stdout).toBe(`joined cluster ${final.clusterId} as ${roles[NODES.indexOf(n)]}\n`);
  await expectEveryAdmissionAudited(h, NODES, final.ids);

  // Serialized: no two nodes' installers ran at once, etcd never held two non-voters, and no
  // installer was ever turned away by another node's learner. ("unhealthy cluster" is etcd's
  // 5 s settling after each join, which the installer waits out like kubeadm does.)
  expect(overlappingWindows(h)).toEqual([]);
  expect(watch.samples).toBeGreaterThan(10);
  expect(watch.maxNonVoters).toBeLessThanOrEqual(1);
  const output = [...h.runs.values()].flat().flatMap((r) => r.otherOutput);
  expect(output.filter((l) => /too many learner/i.test(l))).toEqual([]);
  // Every installer ran, and only the bootstrap one created a cluster.
  expect(output.filter((l) => /etcd is healthy: a new cluster/.test(l))).toHaveLength(1);
  expect(output.filter((l) => /added learner/.test(l))).toHaveLength(NODES.length - 1);
  // On TLS, with client-certificate auth on the installers' etcd.
  await expectClientCertificateRequired(h, h.node(NODES[1]!).clientURL);
  Object.assign(summary, { tookMs: took, clusterId: final.clusterId, maxNonVoters: watch.maxNonVoters, samples: watch.samples });
}, 360_000);
