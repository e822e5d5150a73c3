/**
 * In the lab (test/lab/): a node that cannot reach the broker is admitted all the same (the
 * broker does not know), holds the slot only until its lease ends, and the node behind it goes;
 * once the network heals, the cut node finds its ticket expired, queues again at the back and
 * joins. Nothing is added for it while it is cut. Every controller on a host of its own, etcd
 * on 2379/2380 of the host's address.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { Lab, labSkipReason } from "../lab/lab.ts";
import { ClusterHarness } from "../support/cluster.ts";
import { expectOneHealthyCluster } from "../support/cluster-assertions.ts";

const skip = await labSkipReason();
const NODES = ["ctrl-0", "ctrl-1", "ctrl-2"];
let lab: Lab;
let h: ClusterHarness;

beforeAll(async () => {
  if (skip) return;
  lab = await Lab.create();
  h = await ClusterHarness.start({ scenario: "lab-broker-cut", seed: 0, nodes: NODES, lab, policy: { leaseSeconds: 10 } });
});

afterAll(async () => {
  h?.writeTimeline({ lab: lab?.events });
  await h?.cleanup();
  lab?.destroy();
});

const tickets = async (node: string) =>
  ((await h.client.admin(h.cluster).tickets()).body.tickets as { node: string; state: string }[]).filter((t) => t.node === node).map((t) => t.state);

// Waits for the cut node's lease to end (the point of it), the next node's join, and the cut
// node's own join once healed (etcd's 5 s window each).
it.skipIf(skip)(
  "a queued node cut from the broker loses its admission when the lease ends, the next node goes, and it queues again when back",
  { timeout: 300_000 },
  async () => {
    h.startSampling();
    h.startAgent("ctrl-0");
    await h.waitFor("ctrl-0 to bootstrap", () => h.joined("ctrl-0"), 90_000);
    expect((await h.client.admin(h.cluster).pause()).status).toBe(200);

    h.startAgent("ctrl-1");
    await h.waitForStep("ctrl-1", "queued");
    const cut = lab.partition(["ctrl-1"], ["broker"]);
    h.timeline.add("partition", "ctrl-1", { from: ["broker"] });
    h.startAgent("ctrl-2");
    await h.waitForStep("ctrl-2", "queued");
    expect((await h.client.admin(h.cluster).resume()).status).toBe(200);

    // ctrl-1 is admitted where it cannot hear it; its lease (10 s) ends and ctrl-2 joins meanwhile.
    await h.waitFor("ctrl-2 to join while ctrl-1 is cut", () => h.joined("ctrl-2"), 120_000);
    expect(await tickets("ctrl-1")).toEqual(["expired"]);
    const audit = await h.audit();
    expect(audit.some((a) => a.action === "lease.expired" && a.detail.node === "ctrl-1")).toBe(true);
    expect(h.current("ctrl-1")!.events.some((e) => e.step === "member-added")).toBe(false);
    expect(h.joined("ctrl-1")).toBe(false);

    lab.heal(cut);
    h.timeline.add("heal", "ctrl-1");
    await h.waitFor("ctrl-1 to queue again and join once it reaches the broker", () => h.joined("ctrl-1"), 180_000);
    expect(await tickets("ctrl-1")).toEqual(["expired", "joined"]);
    expect(h.current("ctrl-1")!.run, "the same agent process, never restarted").toBe(1);
    h.stopSampling();
    await expectOneHealthyCluster(h, NODES);
  },
);
