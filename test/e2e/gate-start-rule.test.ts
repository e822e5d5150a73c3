/**
 * Gate mode faster than one at a time, safely: 1 + 4 unmodified installers (kubeadm's etcd phase
 * with etcdctl: the member add's answer is the --initial-cluster) started at once, maxInFlight 4,
 * their etcd with --max-learners 4. The start rule admits the next node only once every admitted
 * node's member has started, so every --initial-cluster names every member and no etcd refuses
 * to start ("member count is unequal", kubernetes/kubeadm#2005), while admissions still overlap:
 * a node is admitted before the one ahead of it is a voter.
 *
 * Runs on $E2E_ETCD_VERSION when that is 3.6 or later (several learners), else on 3.6.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startPipelinedCluster, type ClusterHarness } from "../support/cluster.ts";
import { expectEveryAdmissionAudited, expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { MULTI_LEARNER_VERSION as VERSION } from "../support/etcd.ts";
import { installerCommand, installerDataDir, NonVoterWatch } from "../support/gate.ts";

const NODES = ["ctrl-0", "ctrl-1", "ctrl-2", "ctrl-3", "ctrl-4"];
const MAX_IN_FLIGHT = 4;
// Each learner waits this long between its start and its promote, as one receiving a snapshot
// would: the agent, polling etcd every 500 ms, sees its member started before it is a voter.
// Without it, a promote on an empty cluster can come within one poll of the start, and that
// node's start goes unreported: its ticket's completion frees the way instead.
const CATCH_UP_MS = 2_000;
let h: ClusterHarness;
const summary: Record<string, unknown> = { etcd: VERSION };

beforeAll(async () => {
  h = await startPipelinedCluster("gate-start-rule", NODES, MAX_IN_FLIGHT);
}, 600_000);

afterAll(async () => {
  h?.writeTimeline(summary);
  await h?.cleanup();
});

it(`1 + 4 installers with maxInFlight ${MAX_IN_FLIGHT}: every --initial-cluster complete, admissions overlapping`, async () => {
  const watch = new NonVoterWatch(h);
  watch.start();
  for (const name of NODES) {
    const node = h.node(name);
    h.startAgent(name, { args: h.gateAgentArgs(node, await installerCommand(h, node, { maxLearners: MAX_IN_FLIGHT, catchUpMs: CATCH_UP_MS })) });
  }
  await h.waitFor("every agent to report joined", () => NODES.every((n) => h.joined(n)), 300_000);
  const exits = await Promise.all(NODES.map((n) => h.current(n)!.exited));
  watch.stop();
  expect(
    exits.map((x) => x.code),
    h.describeAgents(),
  ).toEqual(NODES.map(() => 0));
  const final = await expectOneHealthyCluster(h, NODES);
  await expectEveryAdmissionAudited(h, NODES, final.ids);

  // No etcd refused its --initial-cluster, no installer was turned away by etcd's learner limit,
  // and each installer added its learner once.
  const etcdLogs = NODES.map((n) => readFileSync(`${installerDataDir(h.node(n))}.log`, "utf8"));
  expect(etcdLogs.filter((l) => /member count is unequal/.test(l)).length, "etcd logs with 'member count is unequal'").toBe(0);
  const output = [...h.runs.values()].flat().flatMap((r) => r.otherOutput);
  expect(output.filter((l) => /too many learner/i.test(l))).toEqual([]);
  expect(output.filter((l) => /added learner/.test(l))).toHaveLength(NODES.length - 1);

  // The broker's order: every join admission came after every admitted node's member started
  // (or its ticket joined), and at least one came before the node ahead of it was a voter.
  const audit = await h.audit();
  const open = new Map<string, { started: boolean }>();
  let overlapping = 0;
  for (const a of audit) {
    const node = String(a.detail.node ?? "");
    if (a.action === "ticket.admitted") {
      if (a.detail.role === "join") {
        expect(
          [...open.entries()].filter(([, t]) => !t.started).map(([n]) => n),
          `admitting ${node}: members not started`,
        ).toEqual([]);
        if (open.size > 0) overlapping++;
      }
      open.set(node, { started: false });
    } else if (a.action === "ticket.member_started") open.get(node)!.started = true;
    else if (a.action === "ticket.joined" || a.action === "lease.expired" || a.action === "ticket.abandoned") open.delete(node);
  }
  // At most one report per joiner, and at least one: the overlap below needs one.
  const reported = audit.filter((a) => a.action === "ticket.member_started").map((a) => String(a.detail.node));
  expect(new Set(reported).size, `start reports: ${reported.join(", ")}`).toBe(reported.length);
  expect(reported.length, "joiners that reported their start").toBeGreaterThan(0);
  const joiners = audit.filter((a) => a.action === "ticket.admitted" && a.detail.role === "join").map((a) => String(a.detail.node));
  expect(
    reported.every((n) => joiners.includes(n)),
    `start reports: ${reported.join(", ")}; joiners: ${joiners.join(", ")}`,
  ).toBe(true);
  expect(overlapping, "admissions while another node was not yet a voter").toBeGreaterThan(0);
  expect(watch.maxNonVoters).toBeGreaterThanOrEqual(1);
  Object.assign(summary, { clusterId: final.clusterId, overlapping, maxNonVoters: watch.maxNonVoters });
}, 400_000);
