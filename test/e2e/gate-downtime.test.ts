/**
 * Gate mode: a node that crashes mid-join (agent and installer killed after the installer added
 * its learner) and comes back only after its lease ended. Meanwhile the node behind it was
 * admitted, and its installer meets the leftover learner ("too many learner members" on etcd's
 * default of one learner). The restarted agent removes that learner before it queues again, at
 * the back: the node admitted before it joins, then the node itself. A 10-second lease (the
 * cluster's policy) keeps the downtime short. This one runs on plain http (the installer without
 * a PKI directory, the agent without etcd client certificates): gate mode does not need TLS.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { ClusterHarness, hex } from "../support/cluster.ts";
import { expectEveryAdmissionAudited, expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { installerCommand, NonVoterWatch } from "../support/gate.ts";
import { e2eSeed } from "../support/seeded.ts";

const NODES = ["ctrl-0", "ctrl-1", "ctrl-2"];
const LEASE_SECONDS = 10;
let h: ClusterHarness;
const summary: Record<string, unknown> = {};

beforeAll(async () => {
  // Plain http on purpose, the other gate tests run on TLS.
  h = await ClusterHarness.start({
    scenario: "gate-downtime",
    seed: e2eSeed("gate-downtime"),
    nodes: NODES,
    policy: { leaseSeconds: LEASE_SECONDS },
    etcdTls: false,
  });
});

afterAll(async () => {
  h?.writeTimeline(summary);
  await h?.cleanup();
});

// Waits for the crashed node's 10 s lease to end (the point of it), then the two joins one at a
// time (etcd's 5 s window each).
it("a node back after its lease ended removes the learner it left before it queues again; the node admitted meanwhile joins", async () => {
  const args = async (name: string, options: Parameters<typeof installerCommand>[2] = {}) =>
    h.gateAgentArgs(h.node(name), await installerCommand(h, h.node(name), options));
  h.startAgent("ctrl-0", { args: await args("ctrl-0") });
  expect((await h.current("ctrl-0")!.exited).code, h.describeAgents()).toBe(0);

  // ctrl-1's installer adds its learner, but its etcd exits at once: the learner stays
  // unpromoted for as long as the test needs. ctrl-2 queues behind it.
  h.startAgent("ctrl-1", { args: await args("ctrl-1", { etcdBin: "/bin/false" }) });
  await h.waitFor("ctrl-1's learner in etcd", () => !!h.current("ctrl-1")!.events.some((e) => e.step === "member-added" && e.learner === true), 120_000);
  const first = h.current("ctrl-1")!;
  const learner = String(first.events.find((e) => e.step === "member-added")!.memberID);
  h.startAgent("ctrl-2", { args: await args("ctrl-2") });
  await h.waitForStep("ctrl-2", "queued");

  // The node goes down: its agent and its installer are killed; nothing removes the learner. The
  // agent first: an agent that sees its installer die removes the learner itself, at once.
  const installer = [...first.events].reverse().find((e) => e.step === "exec")!.pid as number;
  await h.kill("ctrl-1", "agent");
  h.timeline.add("installer-sigkill", "ctrl-1", { pid: installer });
  process.kill(-installer, "SIGKILL");

  // Its lease ends; ctrl-2 is admitted and its installer meets the leftover learner: etcd refuses
  // its learner add (the installer retries, naming etcd's answer on etcd 3.4; etcdctl 3.6+
  // prints a warning line first).
  await h.waitFor(
    "ctrl-2's installer to be refused a learner",
    () => h.current("ctrl-2")!.otherOutput.some((l) => l.startsWith("[installer ctrl-2] adding a learner:")),
    LEASE_SECONDS * 1000 + 60_000,
  );
  const audit = await h.audit();
  expect(
    audit.some((a) => a.action === "lease.expired" && a.detail.node === "ctrl-1"),
    "ctrl-1's lease ended",
  ).toBe(true);
  const gateway = h.etcd(h.node("ctrl-0").clientURL, 3_000);
  const members = async () => {
    const list = await gateway.memberList();
    if (!list.ok) throw new Error(`member list: ${list.error.message}`);
    return list.value.members;
  };
  expect(
    (await members()).filter((m) => m.isLearner).map((m) => m.id),
    "ctrl-1's learner is still the one learner",
  ).toEqual([learner]);

  // Back up: the agent removes its old learner first, then queues with a new ticket.
  const watch = new NonVoterWatch(h);
  watch.start();
  h.startAgent("ctrl-1", { args: await args("ctrl-1") });
  const second = h.current("ctrl-1")!;
  // The agent says so once etcd answered the removal: wait for its word, then look at etcd.
  const removedEvent = () => second.events.findIndex((e) => e.step === "etcd-exit" && e.memberID === learner);
  await h.waitFor(`ctrl-1's agent to remove its old learner ${hex(learner)}`, () => removedEvent() >= 0, 30_000);
  const removed = removedEvent();
  expect(
    (await members()).some((m) => m.id === learner),
    "the old learner is gone from etcd",
  ).toBe(false);
  const ticket = second.events.findIndex((e) => e.step === "ticket");
  expect(ticket === -1 || ticket > removed, "before it asked for a ticket").toBe(true);

  expect((await h.current("ctrl-2")!.exited).code, h.describeAgents()).toBe(0);
  expect((await second.exited).code, h.describeAgents()).toBe(0);
  watch.stop();
  // A new ticket, behind ctrl-2's (queued, or admitted at once if ctrl-2 was quick to join).
  const firstTicket = first.events.find((e) => e.step === "ticket")!.ticket;
  const secondTicket = second.events.find((e) => e.step === "ticket")!;
  expect(secondTicket.msg).toMatch(/^ticket \S+: (queued|admitted) \(join\)$/);
  expect(secondTicket.ticket).not.toBe(firstTicket);
  const final = await expectOneHealthyCluster(h, NODES);
  expect(final.ids.get("ctrl-1"), "a new member").not.toBe(learner);
  await expectEveryAdmissionAudited(h, NODES, final.ids);
  const after = await h.audit();
  const joined = (node: string) => after.find((a) => a.action === "ticket.joined" && a.detail.node === node)!.seq;
  expect(joined("ctrl-2"), "the node admitted before it joined first").toBeLessThan(joined("ctrl-1"));
  expect(watch.maxNonVoters).toBeLessThanOrEqual(1);
  Object.assign(summary, { clusterId: final.clusterId, learner: hex(learner), maxNonVoters: watch.maxNonVoters });
}, 300_000);
