/**
 * The protocol's answer to a network or clock fault, one scenario per fault, each in a lab of its
 * own (test/lab/): every controller, the join API and the broker on a host of their own.
 * - a learner cut from the leader: the join API holds its promote, the slot is not handed on;
 * - the join API cut from the broker: nothing is added or promoted;
 * - skewed clocks: an agent minutes off and a join API within its clock tolerance still join;
 *   a join API beyond it refuses with a clear error and the node frees its slot;
 * - the leader's link flapping and the leader paused (SIGSTOP) while a node joins: it joins.
 */
import { afterEach, expect, it } from "vitest";
import { Lab, labSkipReason } from "../lab/lab.ts";
import { ClusterHarness, type HarnessOptions } from "../support/cluster.ts";
import { expectOneHealthyCluster } from "../support/cluster-assertions.ts";

const skip = await labSkipReason();
let lab: Lab | null = null;
let h: ClusterHarness | null = null;

async function start(scenario: string, nodes: string[], options: Partial<HarnessOptions> = {}): Promise<{ lab: Lab; h: ClusterHarness }> {
  lab = await Lab.create();
  h = await ClusterHarness.start({ scenario, seed: 0, nodes, lab, ...options });
  h.startSampling();
  return { lab, h };
}

afterEach(async () => {
  h?.writeTimeline({ lab: lab?.events });
  await h?.cleanup();
  lab?.destroy();
  h = null;
  lab = null;
});

/** libfaketime reads a host's clock file again after a second: a skew holds for every process after this. */
const CLOCK_FILE_READ_MS = 2_500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const stepped = (x: ClusterHarness, node: string, step: string) => !!x.current(node)?.events.some((e) => e.step === step);

/**
 * Cuts `node` from `peers` the moment its agent reports `step` (read from its output as it comes,
 * not by polling): at `admitted` its etcd has not started, so it cannot have fetched anything yet.
 */
function cutAt(lab: Lab, x: ClusterHarness, node: string, step: string, peers: string[]): Promise<number> {
  return new Promise((resolve) => {
    let done = false;
    x.onEvent((run, e) => {
      if (done || run.node.name !== node || e.step !== step) return;
      done = true;
      const id = lab.partition([node], peers);
      x.timeline.add("partition", node, { from: peers, at: step });
      resolve(id);
    });
  });
}

async function bootstrap(x: ClusterHarness): Promise<void> {
  x.startAgent("ctrl-0");
  await x.waitFor("ctrl-0 to bootstrap", () => x.joined("ctrl-0"), 90_000);
}

// Waits for the cut to show no promotion (the point of it), then both joins once healed.
it.skipIf(skip)("a learner cut from the leader is not promoted and holds the slot; healed, it and the next node join", { timeout: 300_000 }, async () => {
  const { lab, h } = await start("lab-learner-cut", ["ctrl-0", "ctrl-1", "ctrl-2"]);
  await bootstrap(h);
  const cutting = cutAt(lab, h, "ctrl-1", "admitted", ["ctrl-0"]);
  h.startAgent("ctrl-1");
  const cut = await cutting;
  await h.waitForStep("ctrl-1", "member-added");
  h.startAgent("ctrl-2");
  await h.waitForStep("ctrl-2", "queued");
  // A partition of 25 s: no promote, nobody else admitted, and ctrl-1 does not give up.
  for (let i = 0; i < 25; i++) {
    await sleep(1000);
    h.assertInvariants();
    expect(stepped(h, "ctrl-1", "promoted") || stepped(h, "ctrl-2", "admitted"), h.describeAgents()).toBe(false);
    expect(h.current("ctrl-1")!.exit, h.describeAgents()).toBeNull();
  }
  const [view] = await h.finalViews(["ctrl-0"]);
  // The learner, named by its peer URL (etcd lists a member that never reached it without a name).
  expect(view!.members.filter((m) => m.isLearner).map((m) => m.peerURLs)).toEqual([[h.node("ctrl-1").peerURL]]);
  lab.heal(cut);
  h.timeline.add("heal");
  await h.waitFor("ctrl-1 and ctrl-2 to join", () => h.joined("ctrl-1") && h.joined("ctrl-2"), 180_000);
  h.stopSampling();
  await expectOneHealthyCluster(h, ["ctrl-0", "ctrl-1", "ctrl-2"]);
});

// Waits out 30 s in which nothing may be added (the point of it), then the join once healed.
it.skipIf(skip)("a join API cut from the broker adds nothing; healed, the node joins", { timeout: 300_000 }, async () => {
  const { lab, h } = await start("lab-join-api-cut", ["ctrl-0", "ctrl-1"]);
  await bootstrap(h);
  const cut = lab.partition(["join-api"], ["broker"]);
  h.timeline.add("partition", "join-api", { from: ["broker"] });
  h.startAgent("ctrl-1");
  await h.waitForStep("ctrl-1", "admitted");
  await h.waitFor("ctrl-1 to call the join API", () => stepped(h, "ctrl-1", "member-add"), 60_000);
  // Longer than the join API's calls to the broker take to time out (and be retried).
  for (let i = 0; i < 30; i++) {
    await sleep(1000);
    h.assertInvariants();
    expect(stepped(h, "ctrl-1", "member-added"), h.describeAgents()).toBe(false);
    expect(h.current("ctrl-1")!.exit, h.describeAgents()).toBeNull();
  }
  const [view] = await h.finalViews(["ctrl-0"]);
  expect(view!.members.map((m) => m.name)).toEqual(["ctrl-0"]);
  lab.heal(cut);
  await h.waitFor("ctrl-1 to join", () => h.joined("ctrl-1"), 120_000);
  h.stopSampling();
  await expectOneHealthyCluster(h, ["ctrl-0", "ctrl-1"]);
});

// Waits for a skewed agent's lease through 20 s as a cut-off learner (the point of it), and joins
// through join APIs on skewed clocks.
it.skipIf(skip)(
  "skewed clocks: an agent 4 minutes behind keeps its lease and joins, a join API within its tolerance works; a join API beyond it refuses clearly and the slot is freed",
  { timeout: 300_000 },
  async () => {
    const { lab, h } = await start("lab-skew", ["ctrl-0", "ctrl-1", "ctrl-2"], { policy: { leaseSeconds: 10 } });
    lab.skew("ctrl-0", 180);
    lab.skew("ctrl-1", -240);
    lab.skew("join-api", 20); // the join API's default --clock-tolerance is 30 s
    await sleep(CLOCK_FILE_READ_MS);
    await bootstrap(h);
    // Held as a learner for two lease lengths: only heartbeats paced on the broker's clock keep its admission.
    const cutting = cutAt(lab, h, "ctrl-1", "admitted", ["ctrl-0"]);
    h.startAgent("ctrl-1");
    const cut = await cutting;
    await h.waitForStep("ctrl-1", "member-added");
    await sleep(20_000);
    lab.heal(cut);
    await h.waitFor("ctrl-1 to join", () => h.joined("ctrl-1"), 120_000);
    const audit = await h.audit();
    expect(audit.filter((a) => a.action === "lease.expired").map((a) => a.detail.node)).toEqual([]);
    expect(h.current("ctrl-1")!.run).toBe(1);

    lab.skew("join-api", -120); // tokens it sees were issued two minutes in its future
    await sleep(CLOCK_FILE_READ_MS);
    const run = h.startAgent("ctrl-2");
    const exit = await run.exited;
    expect(exit.code, h.describeAgents()).toBe(3);
    const last = run.events[run.events.length - 1]!;
    expect(last.step).toBe("refused");
    expect(last.msg).toMatch(/abandoned/);
    const status = await h.client.admin(h.cluster).status();
    expect(status.body.inFlight, JSON.stringify(status.body)).toEqual([]);
    const [view] = await h.finalViews(["ctrl-0"]);
    expect(view!.members.map((m) => m.name).sort()).toEqual(["ctrl-0", "ctrl-1"]);

    lab.skew("join-api", 0);
    await sleep(CLOCK_FILE_READ_MS);
    h.startAgent("ctrl-2");
    await h.waitFor("ctrl-2 to join once the join API's clock is right", () => h.joined("ctrl-2"), 120_000);
    h.stopSampling();
    await expectOneHealthyCluster(h, ["ctrl-0", "ctrl-1", "ctrl-2"]);
  },
);

// Waits for the link's flaps and the leader's 6 s pause (the point of it), then the join.
it.skipIf(skip)("the leader's link flaps and the leader is paused while a node joins: it joins", { timeout: 300_000 }, async () => {
  const { lab, h } = await start("lab-flap-pause", ["ctrl-0", "ctrl-1", "ctrl-2"]);
  await bootstrap(h);
  h.startAgent("ctrl-1");
  await h.waitForStep("ctrl-1", "member-added");
  await lab.flap("ctrl-0", 4_000);
  await h.waitFor("ctrl-1 to join", () => h.joined("ctrl-1"), 120_000);
  h.startAgent("ctrl-2");
  await h.waitForStep("ctrl-2", "member-added");
  // The whole of ctrl-0 (agent and etcd) stops, as a VM its hypervisor paused.
  const leader = h.current("ctrl-0")!.pid;
  lab.pause(leader);
  await sleep(6_000);
  lab.resume(leader);
  await h.waitFor("ctrl-2 to join", () => h.joined("ctrl-2"), 120_000);
  h.stopSampling();
  await expectOneHealthyCluster(h, ["ctrl-0", "ctrl-1", "ctrl-2"]);
});
