/**
 * Gate mode: an installer that fails before its node is a voter. Its agent removes the learner
 * the installer left behind, leaves the queue (the ticket is abandoned), and exits 4 naming the
 * installer's exit status; the node queued behind it goes next and joins without meeting that
 * learner, even though the recipe's clean-up deleted the client certificate the agent asks etcd
 * with (as `kubeadm reset -f` does). Run again (as a service manager would), the failed node
 * joins at the back. An agent that cannot confirm its learner gone keeps its admission until an
 * admin revokes it. An agent
 * killed after its installer finished asks etcd before anything else and does not run it again.
 * And an installer that starts a cluster of its own although the broker said join (k0s issue
 * #5149's failure) is refused, never reported as joined.
 */
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ClusterHarness } from "../support/cluster.ts";
import { expectEveryAdmissionAudited, expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { installerCommand, NonVoterWatch } from "../support/gate.ts";
import { e2eSeed } from "../support/seeded.ts";

const NODES = ["ctrl-0", "ctrl-1", "ctrl-2"];
/** A node whose agent dies after its installer made it a voter, before it reported that. */
const RESUMER = "ctrl-3";
/** A node whose recipe ignores the broker's role and always creates a cluster. */
const ROGUE = "ctrl-4";
/** A node whose agent cannot reach etcd to remove the learner its failed installer left. */
const HOLDER = "ctrl-5";
let h: ClusterHarness;
const summary: Record<string, unknown> = {};

beforeAll(async () => {
  h = await ClusterHarness.start({ scenario: "gate-failure", seed: e2eSeed("gate-failure"), nodes: [...NODES, RESUMER, ROGUE, HOLDER] });
});

afterAll(async () => {
  h?.writeTimeline(summary);
  await h?.cleanup();
});

// Waits for the failed node's learner to be removed and the next node's join (etcd's 5 s window).
it("an installer exiting 1 after adding its learner: learner removed, ticket abandoned, exit 4 naming the status, the next node joins", async () => {
  const watch = new NonVoterWatch(h);
  watch.start();
  // The installer fails once ctrl-2 is queued behind it, however slowly ctrl-2's agent starts.
  const ctrl2Queued = join(h.node("ctrl-1").stateDir, "ctrl-2-queued");
  const args = async (name: string, failOnce = false) =>
    h.gateAgentArgs(h.node(name), await installerCommand(h, h.node(name), failOnce ? { failOnceAfter: "add", failOnceWhen: ctrl2Queued } : {}));
  // ctrl-1's agent reaches etcd with client certificate files that its recipe's clean-up removes
  // when the join fails, as `kubeadm reset -f` removes /etc/kubernetes/pki: the agent must still
  // remove the learner its installer left (with the copy it keeps in its state dir).
  const tls = h.etcdClientTls!;
  const kubePki = join(dirname(h.node("ctrl-1").stateDir), "ctrl-1-etc-kubernetes-pki");
  mkdirSync(kubePki, { recursive: true });
  const own = {
    [tls.ca!]: join(kubePki, "ca.crt"),
    [tls.cert!]: join(kubePki, "apiserver-etcd-client.crt"),
    [tls.key!]: join(kubePki, "apiserver-etcd-client.key"),
  };
  for (const [from, to] of Object.entries(own)) copyFileSync(from, to);
  const failingArgs = h
    .gateAgentArgs(h.node("ctrl-1"), await installerCommand(h, h.node("ctrl-1"), { failOnceAfter: "add", failOnceWhen: ctrl2Queued, resetRemoves: kubePki }))
    .map((a) => own[a] ?? a);

  h.startAgent("ctrl-0", { args: await args("ctrl-0") });
  expect((await h.current("ctrl-0")!.exited).code, h.describeAgents()).toBe(0);
  expect(h.current("ctrl-0")!.stdout).toMatch(/^joined cluster \S+ as bootstrap$/m);

  // ctrl-1 is admitted and runs its installer, which fails once after `member add --learner`;
  // ctrl-2 waits behind it.
  h.startAgent("ctrl-1", { args: failingArgs });
  await h.waitForStep("ctrl-1", "exec");
  h.startAgent("ctrl-2", { args: await args("ctrl-2") });
  await h.waitForStep("ctrl-2", "queued");
  writeFileSync(ctrl2Queued, "");

  const first = h.current("ctrl-1")!;
  expect((await first.exited).code, h.describeAgents()).toBe(4);
  const gaveUp = first.events.find((e) => e.step === "gave-up")!;
  expect(gaveUp.msg).toMatch(/exited with status 1 before this node was a voter; left the queue \(ticket \S+ abandoned\)/);
  expect(
    first.events.some((e) => e.step === "etcd-exit" && /removed this node's (learner|unstarted member)/.test(e.msg)),
    h.describeAgents(),
  ).toBe(true);
  expect(existsSync(kubePki), "the recipe's clean-up ran").toBe(false);
  expect(first.events.some((e) => /is gone .*copy of the client certificate kept in/.test(e.msg))).toBe(true);
  expect(first.events.filter((e) => /could not remove/.test(e.msg))).toEqual([]);
  expect(first.stdout).toBe("");

  // The node behind it went next, and its installer never met ctrl-1's learner.
  expect((await h.current("ctrl-2")!.exited).code, h.describeAgents()).toBe(0);
  expect(h.current("ctrl-2")!.otherOutput.filter((l) => /too many learner/i.test(l))).toEqual([]);
  const audit = await h.audit();
  const abandoned = audit.find((a) => a.action === "ticket.abandoned" && a.detail.node === "ctrl-1");
  const admitted2 = audit.find((a) => a.action === "ticket.admitted" && a.detail.node === "ctrl-2");
  expect(abandoned, "ctrl-1's ticket abandoned").toBeDefined();
  expect(admitted2!.seq).toBeGreaterThan(abandoned!.seq);

  // Run again, ctrl-1 asks for a new ticket and joins (its installer does not fail twice), with
  // the harness's certificate files, as a node whose recipe made them anew would.
  h.startAgent("ctrl-1", { args: await args("ctrl-1", true) });
  expect((await h.current("ctrl-1")!.exited).code, h.describeAgents()).toBe(0);
  watch.stop();
  const final = await expectOneHealthyCluster(h, NODES);
  for (const n of NODES) expect(h.current(n)!.stdout).toMatch(new RegExp(`^joined cluster ${final.clusterId} as (bootstrap|join)$`, "m"));
  await expectEveryAdmissionAudited(h, NODES, final.ids);
  expect(watch.maxNonVoters).toBeLessThanOrEqual(1);
  Object.assign(summary, { clusterId: final.clusterId, maxNonVoters: watch.maxNonVoters });
}, 300_000);

it("an agent killed after its installer made the node a voter asks etcd first: it completes without running the installer again", async () => {
  const node = h.node(RESUMER);
  const args = h.gateAgentArgs(node, await installerCommand(h, node));
  h.startAgent(RESUMER, { args });
  await h.waitForStep(RESUMER, "exec");
  // Frozen: no heartbeat and no look at etcd while its installer carries on.
  const first = h.current(RESUMER)!;
  process.kill(first.pid, "SIGSTOP");
  await h.waitFor(
    `${RESUMER} to be a started voter`,
    async () => {
      const [view] = await h.finalViews(["ctrl-0"]);
      return view!.members.some((m) => m.name === RESUMER && !m.isLearner);
    },
    120_000,
  );
  await h.kill(RESUMER, "agent");
  h.startAgent(RESUMER, { args });
  const second = h.current(RESUMER)!;
  expect((await second.exited).code, h.describeAgents()).toBe(0);
  expect(second.events.find((e) => e.step === "ticket")?.msg).toMatch(/^resuming ticket \S+: admitted/);
  expect(
    second.events.filter((e) => e.step === "exec"),
    "the installer did not run again",
  ).toEqual([]);
  expect(second.events.some((e) => e.step === "promoted" && /etcd already lists this node as voter/.test(e.msg))).toBe(true);
  expect(second.stdout).toMatch(/^joined cluster \S+ as join$/m);
  const final = await expectOneHealthyCluster(h, [...NODES, RESUMER]);
  expect(second.stdout).toBe(`joined cluster ${final.clusterId} as join\n`);
  const joined = (await h.audit()).filter((a) => a.action === "ticket.joined" && a.detail.node === RESUMER);
  expect(joined.map((a) => String(a.detail.memberID))).toEqual([final.ids.get(RESUMER)]);
}, 240_000);

// Before the rogue node's test: its installer would otherwise find the rogue's cluster among its endpoints.
// Waits for the agent's tries to confirm its learner gone, then the admin's revoke and the next join.
it("an agent that cannot confirm its learner gone keeps the admission until an admin revokes it, and says so", async () => {
  const node = h.node(HOLDER);
  // A client certificate that is nowhere (and never was, so no copy was kept): etcd cannot be asked.
  const nowhere = join(dirname(node.stateDir), "no-such-pki");
  const args = h.gateAgentArgs(node, await installerCommand(h, node, { failOnceAfter: "add" }), [
    "--etcd-cert",
    join(nowhere, "client.crt"),
    "--etcd-key",
    join(nowhere, "client.key"),
  ]);
  h.startAgent(HOLDER, { args });
  const run = h.current(HOLDER)!;
  await h.waitFor(
    `${HOLDER} to hold its admission for its learner`,
    async () => run.events.some((e) => /still holding this node's admission/.test(e.msg)),
    120_000,
  );
  const audit = await h.audit();
  const admitted = audit.find((a) => a.action === "ticket.admitted" && a.detail.node === HOLDER)!;
  expect(audit.filter((a) => a.subject === admitted.subject && ["ticket.abandoned", "lease.expired"].includes(a.action))).toEqual([]);
  const [view] = await h.finalViews(["ctrl-0"]);
  const learner = view!.members.find((m) => m.peerURLs.includes(node.peerURL));
  expect(learner?.isLearner, "the failed installer's learner is still there").toBe(true);

  expect((await h.client.admin(h.cluster).revokeAdmission(String(admitted.detail.jti), "the learner is removed by hand")).status).toBe(200);
  expect((await run.exited).code, h.describeAgents()).not.toBe(0);
  expect(run.events.find((e) => /could not remove this node's non-voting member/.test(e.msg))?.msg).toMatch(
    /the admission ended before etcd confirmed it gone/,
  );
  // As the message says: by hand.
  expect((await h.etcd(h.node("ctrl-0").clientURL, 5_000).memberRemove(learner!.id)).ok).toBe(true);
}, 240_000);

it("an installer that starts a new cluster although told to join is refused (exit 3), never recorded as joined", async () => {
  const node = h.node(ROGUE);
  // Asking only its own etcd, the agent sees what that node really became.
  const args = h.gateAgentArgs(node, await installerCommand(h, node, { alwaysInit: true }), ["--etcd", node.clientURL]);
  h.startAgent(ROGUE, { args });
  const run = h.current(ROGUE)!;
  expect((await run.exited).code, h.describeAgents()).toBe(3);
  expect(run.events.find((e) => e.step === "exec")?.role).toBe("join");
  expect(run.events.find((e) => e.step === "refused")?.msg).toMatch(
    /lists it as the only member of cluster \S+: its installer started a new cluster of its own \(split brain\)/,
  );
  expect(run.stdout).toBe("");
  const audit = await h.audit();
  expect(audit.filter((a) => a.action === "ticket.joined" && a.detail.node === ROGUE)).toEqual([]);
  // The real cluster never heard of it.
  const views = await h.finalViews(["ctrl-0"]);
  expect(views[0]!.members.map((m) => m.name).sort()).toEqual([...NODES, RESUMER].sort());
}, 120_000);
