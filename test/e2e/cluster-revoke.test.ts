/**
 * Scenario 3: an admin revokes the admissions of two nodes in the middle of their joins.
 *
 * - ctrl-2 is revoked while its request to add it as a learner is in flight: the join API then
 *   refuses it, so it never becomes a member.
 * - ctrl-3 is revoked after the join API added its learner but before the node learned of it
 *   (the answer is lost): the learner never starts, and the join API removes it to make room
 *   for the next node.
 *
 * Both agents stop with exit code 3 and stay refused when started again; the other nodes join
 * and the cluster ends healthy with exactly them as voters. Only an explicit --retry-revoked
 * puts a revoked node back in the queue.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ClusterHarness } from "../support/cluster.ts";
import { expectEveryAdmissionAudited, expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { e2eSeed, seededRandom } from "../support/seeded.ts";
import type { ProxiedRequest } from "../support/fault-proxy.ts";

const MEMBERS = ["ctrl-0", "ctrl-1", "ctrl-4"];
const REVOKED = ["ctrl-2", "ctrl-3"];
const NODES = ["ctrl-0", "ctrl-1", "ctrl-2", "ctrl-3", "ctrl-4"];
const seed = e2eSeed("revoke");
let h: ClusterHarness;
const summary: Record<string, unknown> = {};

beforeAll(async () => {
  h = await ClusterHarness.start({ scenario: "revoke", seed, nodes: NODES, faultProxy: true, random: seededRandom(seed) });
});

afterAll(async () => {
  // Written whatever the outcome: a failed run's timeline is the one worth reading.
  h?.writeTimeline(summary);
  await h?.cleanup();
});

const addRequestOf = (node: string) => (r: ProxiedRequest) => r.method === "POST" && r.path === "/v1beta1/etcd/members" && r.body?.node === node;

// Waits for the joins one at a time (etcd's 5 s window each), the two revoked nodes' refusals,
// and the join API removing the unstarted learner to make room.
it("a node whose admission is revoked mid-join never becomes a member, and the cluster stays healthy", async () => {
  const revocations: Promise<void>[] = [];
  const revoke = (node: string) => {
    const jti = h.current(node)!.events.find((e) => e.step === "admitted")?.jti as string;
    h.timeline.add("admin-revoke", node, { jti });
    revocations.push(
      (async () => {
        const res = await h.client.admin(h.cluster).revokeAdmission(jti, `scenario 3: ${node} must not join`);
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        h.proxy!.release();
      })(),
    );
  };
  // ctrl-2: held at its add, revoked, then let through.
  h.proxy!.hold(addRequestOf("ctrl-2"), () => revoke("ctrl-2"));
  // ctrl-3: the add goes through but its answer is lost; the retry is held, revoked, let through.
  h.proxy!.dropAnswerOnce(
    addRequestOf("ctrl-3"),
    () => {
      h.timeline.add("add-answer-dropped", "ctrl-3");
      h.proxy!.hold(addRequestOf("ctrl-3"), () => revoke("ctrl-3"));
    },
    (status) => status === 200,
  );

  h.startSampling();
  // Started one after the other so that the queue order is ctrl-1, ctrl-2, ctrl-3, ctrl-4.
  h.startAgent("ctrl-0");
  await h.waitForStep("ctrl-0", "admitted");
  for (const n of ["ctrl-1", "ctrl-2", "ctrl-3", "ctrl-4"]) {
    h.startAgent(n);
    await h.waitForStep(n, "ticket");
  }

  const [x2, x3] = await Promise.all(REVOKED.map((n) => h.current(n)!.exited));
  await h.waitFor("the other nodes to join", () => MEMBERS.every((n) => h.joined(n)), 180_000);
  await Promise.all(revocations);
  h.stopSampling();

  // The revoked agents refused (exit 3), saying why, and never started etcd.
  for (const [n, x] of [
    ["ctrl-2", x2],
    ["ctrl-3", x3],
  ] as const) {
    expect(x?.code, `${n} exit code`).toBe(3);
    const refused = h.current(n)!.events.find((e) => e.step === "refused");
    expect(refused?.msg).toMatch(/revoked/);
    expect(h.current(n)!.events.some((e) => e.step === "etcd-start")).toBe(false);
    expect(existsSync(join(h.node(n).dataDir, "member"))).toBe(false);
  }
  expect(h.proxy!.stats.droppedAnswers).toBe(1);

  // etcd: exactly the three other nodes, all voters, one cluster, all healthy.
  const final = await expectOneHealthyCluster(h, MEMBERS);
  const revokedPeers = REVOKED.map((n) => h.node(n).peerURL);
  for (const v of await h.finalViews(MEMBERS)) {
    expect(v.members.flatMap((m) => m.peerURLs).filter((u) => revokedPeers.includes(u))).toEqual([]);
  }
  // ctrl-3's learner had been added, and the join API removed it to make room for ctrl-4.
  expect(h.joinApi.output()).toMatch(/added learner [0-9a-f]+ for node ctrl-3/);
  expect(h.joinApi.output()).toMatch(/removed unstarted learner [0-9a-f]+/);

  // The broker: both admissions revoked by the admin, their tickets revoked, the others joined.
  await expectEveryAdmissionAudited(h, MEMBERS, final.ids);
  const audit = await h.audit();
  expect(
    audit
      .filter((a) => a.action === "admission.revoked")
      .map((a) => a.detail.node)
      .sort(),
  ).toEqual(REVOKED);
  expect(audit.filter((a) => a.action === "ticket.joined" && REVOKED.includes(a.detail.node as string))).toEqual([]);
  const revokedTickets = await h.client.admin(h.cluster).tickets({ state: "revoked" });
  expect(revokedTickets.body.tickets.map((t: { node: string }) => t.node).sort()).toEqual(REVOKED);

  // Started again, a revoked agent stays refused: it does not quietly take a new place in the queue.
  const again = h.startAgent("ctrl-2");
  expect((await again.exited).code).toBe(3);
  expect(again.events.find((e) => e.step === "refused")?.msg).toMatch(/revoked/);

  // Revocation ends one admission, not the node: with --retry-revoked it queues again and joins.
  const retried = h.startAgent("ctrl-2", { args: [...h.agentArgs(h.node("ctrl-2")), "--retry-revoked"] });
  await h.waitFor("ctrl-2 to join after --retry-revoked", () => h.joined("ctrl-2"), 120_000);
  expect(retried.events.filter((e) => e.step === "admitted")).toHaveLength(1);
  await expectOneHealthyCluster(h, [...MEMBERS, "ctrl-2"]);

  Object.assign(summary, { clusterId: final.clusterId, members: final.memberCount, revoked: REVOKED });
  const exits = await Promise.all([...MEMBERS, "ctrl-2"].map((n) => h.stop(n)));
  expect(exits.map((x) => x.code)).toEqual([0, 0, 0, 0]);
}, 300_000);
