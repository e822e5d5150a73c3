/**
 * Gate mode with an installer that adds its node as a *voting* member and fails before its etcd
 * runs (k0s before 1.36 adds voters): on a one-member cluster that costs etcd its quorum, and
 * etcd then removes no member, so the agent cannot free the way for the next node by itself.
 *
 * - With `--rescue-etcd`, the agent runs that member's etcd itself (from the member list, a data
 *   dir of its own), which gives the cluster its quorum back, removes the member, runs
 *   `--cleanup`, leaves the queue and exits 4; the next node joins.
 * - Without it, the agent gives up after `--removal-timeout`: it tells the broker, which ends the
 *   ticket and pauses the cluster as needing an operator (status, metric, audit), so the next
 *   node stays queued; the agent exits 4 naming the member and the command that removes it,
 *   and the queue is never held by an agent that waits forever.
 *
 * Plain http etcd: the rescue's peer certificates are the k0s lab's part (lab-k0s.test.ts).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { ClusterHarness } from "../support/cluster.ts";
import { installerCommand } from "../support/gate.ts";
import { e2eSeed } from "../support/seeded.ts";
import { memberIdHex } from "../../src/shared/protocol/member-id.ts";

const harnesses: ClusterHarness[] = [];
afterAll(async () => {
  for (const h of harnesses) {
    h.writeTimeline({});
    await h.cleanup();
  }
});

/** A join recipe that adds this node as a voter with the real etcdctl and fails before starting etcd. */
function voterAddThenFail(h: ClusterHarness, node: string, etcdctl: string): string {
  const first = h.nodes[0]!;
  const n = h.node(node);
  return `if [ "$JOIN_BROKER_ROLE" = bootstrap ]; then exit 99; fi; '${etcdctl}' --endpoints=${first.clientURL} member add ${node} --peer-urls=${n.peerURL} >&2 && echo 'failing before etcd starts' >&2; exit 1`;
}

async function start(scenario: string, names: string[]): Promise<{ h: ClusterHarness; etcdctl: string }> {
  const h = await ClusterHarness.start({ scenario, seed: e2eSeed(scenario), nodes: names, etcdTls: false });
  harnesses.push(h);
  const etcdctl = join(h.etcdBin, "..", "etcdctl");
  expect(existsSync(etcdctl), `etcdctl beside ${h.etcdBin}`).toBe(true);
  // The first node bootstraps, and is a started voter before anyone else asks.
  h.startAgent(names[0]!, { args: h.gateAgentArgs(h.node(names[0]!), await installerCommand(h, h.node(names[0]!))) });
  expect((await h.current(names[0]!)!.exited).code, h.describeAgents()).toBe(0);
  return { h, etcdctl };
}

it("a voter added to a one-member cluster whose etcd never runs: the agent runs it to restore quorum, removes it, cleans up, and the next node joins", async () => {
  const { h, etcdctl } = await start("gate-quorum-rescue", ["r0", "r1", "r2"]);
  const cleaned = join(h.node("r1").stateDir, "..", "r1-cleaned");
  const failing = h.gateAgentArgs(h.node("r1"), voterAddThenFail(h, "r1", etcdctl), [
    "--rescue-etcd",
    h.etcdBin,
    "--cleanup",
    `touch '${cleaned}'`,
    "--removal-timeout",
    "120",
  ]);
  h.startAgent("r1", { args: failing });
  await h.waitForStep("r1", "exec");
  h.startAgent("r2", { args: h.gateAgentArgs(h.node("r2"), await installerCommand(h, h.node("r2"))) });
  await h.waitForStep("r2", "queued");

  const run = h.current("r1")!;
  expect((await run.exited).code, h.describeAgents()).toBe(4);
  const steps = run.events.map((e) => `${e.step}: ${e.msg}`);
  expect(
    steps.find((s) => s.startsWith("rescue: etcd cannot remove unstarted voter")),
    steps.join("\n"),
  ).toBeDefined();
  // Removed by the agent, or by its removal asked for before, which etcd commits once quorum is back.
  expect(
    steps.find((s) =>
      /^etcd-exit: (removed this node's member \(run by this agent to restore quorum\)|this node's member \S+ is gone from etcd \(removed once quorum was back\))/.test(
        s,
      ),
    ),
    steps.join("\n"),
  ).toBeDefined();
  expect(
    steps.find((s) => s.startsWith("rescue: stopped the etcd run to restore quorum")),
    steps.join("\n"),
  ).toBeDefined();
  expect(run.events.find((e) => e.step === "gave-up")?.msg).toMatch(
    /exited with status 1 before this node was a voter; left the queue \(ticket \S+ abandoned\)/,
  );
  expect(existsSync(cleaned), "--cleanup ran").toBe(true);
  expect(existsSync(join(h.node("r1").stateDir, "rescue-etcd")), "the rescue's data dir is gone").toBe(false);

  // The node behind it joined; r1's member is gone, and the broker never paused.
  expect((await h.current("r2")!.exited).code, h.describeAgents()).toBe(0);
  const [view] = await h.finalViews(["r0"]);
  expect(view!.members.map((m) => [m.name, m.isLearner]).sort()).toEqual([
    ["r0", false],
    ["r2", false],
  ]);
  const status = await h.client.admin(h.cluster).status();
  expect(status.body).toMatchObject({ paused: false, needsOperator: null });
}, 300_000);

it("without the rescue, the agent gives the member to an operator after --removal-timeout: the broker pauses the cluster, the next node stays queued, exit 4 naming the member and the command", async () => {
  const { h, etcdctl } = await start("gate-quorum-stuck", ["s0", "s1", "s2"]);
  const cleaned = join(h.node("s1").stateDir, "..", "s1-cleaned");
  const failing = h.gateAgentArgs(h.node("s1"), voterAddThenFail(h, "s1", etcdctl), ["--cleanup", `touch '${cleaned}'`, "--removal-timeout", "15"]);
  h.startAgent("s1", { args: failing });
  await h.waitForStep("s1", "exec");
  h.startAgent("s2", { args: h.gateAgentArgs(h.node("s2"), await installerCommand(h, h.node("s2"))) });
  await h.waitForStep("s2", "queued");

  const run = h.current("s1")!;
  const started = Date.now();
  expect((await run.exited).code, h.describeAgents()).toBe(4);
  // Bounded: the timeout, plus the installer's failure and a last try.
  expect(Date.now() - started).toBeLessThan(120_000);
  const audit = await h.audit();
  const marked = audit.find((a) => a.action === "cluster.needs_operator");
  expect(marked?.detail, JSON.stringify(audit.map((a) => a.action))).toMatchObject({ node: "s1" });
  const memberID = String(marked!.detail.memberID);
  const gaveUp = run.events.find((e) => e.step === "gave-up")!.msg;
  expect(gaveUp).toContain(`could not remove member ${memberIdHex(memberID)} (a voter, never started, peer URL ${h.node("s1").peerURL}) from etcd within 15 s`);
  expect(gaveUp).toMatch(
    new RegExp(
      `Remove it: etcdctl --endpoints=\\S+ member remove ${memberIdHex(memberID)}; then resume the cluster \\(join-broker admin resume --cluster ${h.cluster}\\)\\. The broker paused the cluster meanwhile`,
    ),
  );
  expect(run.events.some((e) => e.step === "stuck" && /it paused the cluster/.test(e.msg))).toBe(true);
  expect(existsSync(cleaned), "--cleanup ran").toBe(true);

  // The broker: paused and needing an operator, shown in its status and metrics; s2 not admitted.
  const status = (await h.client.admin(h.cluster).status()).body;
  expect(status).toMatchObject({ paused: true, needsOperator: { node: "s1", memberID } });
  expect(status.needsOperator?.detail).toContain(`member remove ${memberIdHex(memberID)}`);
  const metrics = await h.client.admin(h.cluster).metrics();
  expect(metrics.body).toContain(`join_broker_needs_operator{cluster="${h.cluster}"} 1`);
  await h.waitFor(
    "s2 to be told admissions are paused",
    () => h.current("s2")!.events.some((e) => e.step === "queued" && /admissions are paused/.test(e.msg)),
    60_000,
  );
  expect(audit.filter((a) => a.action === "ticket.admitted" && a.detail.node === "s2")).toEqual([]);
  expect(h.current("s2")!.exit).toBeNull();
}, 300_000);
