/**
 * Learners left behind, and their nodes' way back.
 *
 * A node's learner is added and its etcd runs, but its agent is frozen (SIGSTOP) before the
 * promotion, so it stops heartbeating and its short lease expires. The next node is admitted,
 * and the join API removes the running learner to make room (etcd allows one learner). When the
 * frozen agent resumes (SIGCONT), its admission and its member are gone: it queues again, the
 * join API adds it anew (a new member ID), and the agent, which knows from its state files that
 * the node never was a voter, moves the removed learner's data aside and starts etcd fresh.
 *
 * - ctrl-1: only the agent is frozen. Its etcd learns from its peers that it was removed and
 *   exits; the agent sees that when it resumes.
 * - ctrl-3: its etcd is frozen too, so nothing tells the agent before the join API adds it anew;
 *   the new member ID is what tells it.
 *
 * End state: one cluster, four voters, no learner, one `joined` per node at the broker.
 */
import { readdirSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { memberByPeerUrl } from "../../src/node/etcd/gateway.ts";
import { ClusterHarness, type AgentEvent, type AgentRun } from "../support/cluster.ts";
import { expectEveryAdmissionAudited, expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { e2eSeed, seededRandom } from "../support/seeded.ts";
import { memberIdHex } from "../../src/shared/protocol/member-id.ts";

const NODES = ["ctrl-0", "ctrl-1", "ctrl-2", "ctrl-3"];
const HELD = ["ctrl-1", "ctrl-3"];
const seed = e2eSeed("learner-recovery");
let h: ClusterHarness;
/** Frozen processes, so that cleanup can wake them (a stopped process acts on SIGTERM only once continued). */
const frozen = new Set<number>();
const summary: Record<string, unknown> = {};

beforeAll(async () => {
  h = await ClusterHarness.start({ scenario: "learner-recovery", seed, nodes: NODES, faultProxy: true, random: seededRandom(seed) });
});

afterAll(async () => {
  for (const pid of frozen) signal(pid, "SIGCONT");
  h?.writeTimeline(summary);
  await h?.cleanup();
});

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    /* gone */
  }
}

function freeze(node: string, pid: number, what: string): void {
  signal(pid, "SIGSTOP");
  frozen.add(pid);
  h.timeline.add("sigstop", node, { what, pid });
}

function thaw(node: string, pid: number, what: string): void {
  signal(pid, "SIGCONT");
  frozen.delete(pid);
  h.timeline.add("sigcont", node, { what, pid });
}

const firstMemberID = (run: AgentRun) => String(run.events.find((e) => e.step === "member-added")?.memberID);
const asideEvent = (run: AgentRun): AgentEvent | undefined => run.events.find((e) => e.step === "etcd-exit" && typeof e.aside === "string");

// Waits for the frozen agents' leases to end, the join API to remove their learners for the next
// nodes, and each frozen node to queue again and join with fresh data (etcd's 5 s window each).
it("nodes whose running learners were removed after their leases expired join again as voters, with fresh data", async () => {
  h.startSampling();
  h.startAgent("ctrl-0");
  await h.waitFor("ctrl-0 to bootstrap", () => h.joined("ctrl-0"), 90_000);
  // Short leases from here on: a node that stops heartbeating loses its admission within seconds.
  const policy = await h.client.admin(h.cluster).setPolicy({ leaseSeconds: 3 });
  expect(policy.status, JSON.stringify(policy.body)).toBe(200);
  const gateway = h.etcd(h.node("ctrl-0").clientURL);
  const member = async (node: string) => {
    const list = await gateway.memberList();
    return list.ok ? memberByPeerUrl(list.value.members, h.node(node).peerURL) : undefined;
  };

  // The promotions of ctrl-1 and ctrl-3 are held at the proxy: their learners run, then they freeze.
  const held = new Set<string>();
  h.proxy!.hold(
    (r) => r.method === "POST" && r.path === "/v1beta1/etcd/members/promote" && HELD.includes(r.body?.node as string),
    (r) => held.add(r.body!.node as string),
  );

  // ctrl-1: learner running, agent frozen.
  const a1 = h.startAgent("ctrl-1");
  await h.waitFor("ctrl-1's promotion to be held", () => held.has("ctrl-1"), 90_000);
  freeze("ctrl-1", a1.pid, "agent");
  const first1 = firstMemberID(a1);
  await h.waitFor("ctrl-1's learner to have started", async () => !!(await member("ctrl-1"))?.started, 30_000);
  expect(await member("ctrl-1")).toMatchObject({ id: first1, name: "ctrl-1", isLearner: true });

  // Its lease expires; ctrl-2 is admitted, and the join API removes the running learner to add it.
  h.startAgent("ctrl-2");
  await h.waitFor("ctrl-2 to join while ctrl-1 is frozen", () => h.joined("ctrl-2"), 90_000);
  expect(h.joinApi.output()).toContain(`removed started learner ${memberIdHex(first1)}`);
  expect(await member("ctrl-1")).toBeUndefined();

  // ctrl-3: learner running, agent and etcd frozen.
  const a3 = h.startAgent("ctrl-3");
  await h.waitFor("ctrl-3's promotion to be held", () => held.has("ctrl-3"), 90_000);
  const etcd3 = Number(readFileSync(join(h.node("ctrl-3").stateDir, "etcd.pid"), "utf8"));
  freeze("ctrl-3", a3.pid, "agent");
  const first3 = firstMemberID(a3);
  await h.waitFor("ctrl-3's learner to have started", async () => !!(await member("ctrl-3"))?.started, 30_000);
  freeze("ctrl-3", etcd3, "etcd");
  // Let the held promotions through only once ctrl-3's admission has ended: they must fail.
  await h.waitFor(
    "ctrl-3's lease to expire",
    async () => {
      const tickets = await h.client.admin(h.cluster).tickets({ state: "expired" });
      return tickets.body.tickets.some((t: { node: string }) => t.node === "ctrl-3");
    },
    30_000,
  );
  h.proxy!.release();

  // ctrl-1 resumes: its etcd had exited, saying it was removed. It queues again, and its add
  // removes ctrl-3's running learner in turn; it moves its old data aside and joins.
  thaw("ctrl-1", a1.pid, "agent");
  await h.waitFor("ctrl-1 to join after it resumed", () => h.joined("ctrl-1"), 90_000);
  expect(h.joinApi.output()).toContain(`removed started learner ${memberIdHex(first3)}`);
  expect(asideEvent(a1)?.msg).toMatch(/was removed from the cluster/);

  // ctrl-3's agent resumes with its etcd still frozen: the new member ID from the join API tells it.
  thaw("ctrl-3", a3.pid, "agent");
  await h.waitFor("ctrl-3 to be added anew", () => a3.events.some((e) => e.step === "member-added" && String(e.memberID) !== first3), 90_000);
  thaw("ctrl-3", etcd3, "etcd");
  await h.waitFor("ctrl-3 to join", () => h.joined("ctrl-3"), 90_000);
  expect(asideEvent(a3)?.msg).toMatch(/added this node anew/);
  h.stopSampling();

  const final = await expectOneHealthyCluster(h, NODES);
  for (const [node, run, first] of [
    ["ctrl-1", a1, first1],
    ["ctrl-3", a3, first3],
  ] as const) {
    const now = final.ids.get(node)!;
    expect(now, `${node} has a new member ID`).not.toBe(first);
    expect(run.run, `${node} needed no restart`).toBe(1);
    expect(run.events.filter((e) => e.step === "admitted").length).toBeGreaterThanOrEqual(2);
    // Moved next to the data dir, not deleted: the removed learner's WAL is still there.
    const aside = asideEvent(run)!.aside as string;
    const dataDir = h.node(node).dataDir;
    expect(dirname(aside)).toBe(dirname(dataDir));
    expect(basename(aside)).toMatch(new RegExp(`^${basename(dataDir)}\\.removed-\\d+$`));
    expect(readdirSync(join(aside, "member", "wal")).some((f) => f.endsWith(".wal"))).toBe(true);
    const state = JSON.parse(readFileSync(join(h.node(node).stateDir, "agent-state.json"), "utf8"));
    expect(state.etcd).toMatchObject({ role: "join", memberID: now, voter: true });
  }

  // The broker saw one join per node, each with the member ID etcd really has.
  await expectEveryAdmissionAudited(h, NODES, final.ids);
  Object.assign(summary, { clusterId: final.clusterId, removed: { "ctrl-1": first1, "ctrl-3": first3 } });
  const exits = await Promise.all(NODES.map((n) => h.stop(n)));
  expect(exits.map((x) => x.code)).toEqual([0, 0, 0, 0]);
}, 300_000);
