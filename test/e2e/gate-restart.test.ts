/**
 * Gate mode as a service unit runs it (`--exec … --service`, the installer in the foreground): the
 * agent of the second voter of a two-member cluster is killed and started again; it stops the
 * installer (and etcd) the earlier agent left running and runs the installer again. The cluster
 * has no quorum without this member, so the installer must start etcd from the data dir it has
 * before it asks the cluster anything: asking first waits for an answer only its own etcd can make
 * possible (found by the fault campaign, seed 16 in gate mode).
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { ClusterHarness } from "../support/cluster.ts";
import { expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { installerCommand } from "../support/gate.ts";
import { e2eSeed } from "../support/seeded.ts";

const NODES = ["ctrl-0", "ctrl-1"];
let h: ClusterHarness;

beforeAll(async () => {
  h = await ClusterHarness.start({ scenario: "gate-restart", seed: e2eSeed("gate-restart"), nodes: NODES });
});

afterAll(async () => {
  h?.writeTimeline();
  await h?.cleanup();
});

it("the second voter of two, its agent killed and started again, restarts etcd from its data and the cluster has its quorum back", {
  timeout: 240_000,
}, async () => {
  const args = async (name: string) => h.gateAgentArgs(h.node(name), await installerCommand(h, h.node(name), { foreground: true }), ["--service"]);
  h.startAgent("ctrl-0", { args: await args("ctrl-0") });
  await h.waitFor("ctrl-0 to bootstrap", () => h.joined("ctrl-0"), 90_000);
  h.startAgent("ctrl-1", { args: await args("ctrl-1") });
  await h.waitFor("ctrl-1 to join", () => h.joined("ctrl-1"), 120_000);

  // The agent dies; its installer (a process group of its own) and etcd run on until the restarted
  // agent stops what an earlier agent left running and starts the installer again.
  await h.kill("ctrl-1", "group");
  const again = h.startAgent("ctrl-1", { args: await args("ctrl-1") });
  await h.waitFor("the restarted agent to run the installer again", () => again.events.some((e) => e.step === "exec"), 60_000);
  // Well inside the installer's 2-minute retry of its first etcdctl call.
  await h.waitFor(
    "two started voters that answer",
    async () => {
      try {
        const views = await h.finalViews(NODES);
        return views.every((v) => v.healthy && v.members.length === 2 && v.members.every((m) => m.started && !m.isLearner));
      } catch {
        return false;
      }
    },
    60_000,
  );
  expect(again.exit, h.describeAgents()).toBeNull();
  await expectOneHealthyCluster(h, NODES);
});
