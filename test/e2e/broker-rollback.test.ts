/**
 * A broker whose state was rolled back, caught on the node. `join-broker serve`'s data directory
 * is copied while serve is stopped, before the cluster bootstraps; two nodes bootstrap and join;
 * then the copy is put back in place (a plain copy, which the broker cannot tell from a restart).
 * The broker now thinks the cluster was never bootstrapped and hands the next node its
 * bootstrap ticket. That node asks the other controllers (`--etcd`) first, finds their cluster,
 * and refuses (exit 3, naming its cluster ID) without starting etcd, in the agent's own mode
 * and in gate mode (its COMMAND never runs). The way out: `join-broker admin adopt` with the
 * cluster's members, after which the node joins that cluster.
 */
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ROOT } from "../support/broker.ts";
import { ClusterHarness, hex, type AgentRun } from "../support/cluster.ts";
import { e2eSeed } from "../support/seeded.ts";

const seed = e2eSeed("broker-rollback");
let h: ClusterHarness;
let backup: string;

beforeAll(async () => {
  h = await ClusterHarness.start({ scenario: "broker-rollback", seed, nodes: ["ctrl-0", "ctrl-1", "ctrl-2", "ctrl-3"], broker: { runtime: "serve" } });
  // The backup: the cluster exists at the broker (its enrollment token), no node asked yet.
  await h.broker.stop();
  backup = join(h.dir, "broker-backup");
  cpSync(h.broker.persistDir, backup, { recursive: true });
  await h.broker.restart();
});

afterAll(async () => {
  h?.writeTimeline();
  await h?.cleanup();
});

/** serve stopped, its data directory replaced by the backup, serve started again. */
async function restoreBackup(): Promise<void> {
  await h.broker.stop();
  rmSync(h.broker.persistDir, { recursive: true, force: true });
  cpSync(backup, h.broker.persistDir, { recursive: true });
  await h.broker.restart();
  h.timeline.add("broker-restored");
}

const controllers = () => ["--etcd", [h.node("ctrl-0").clientURL, h.node("ctrl-1").clientURL].join(",")];

/** The agent's end: its exit, or (the failure this guards against) a second cluster's `joined` line. */
async function ending(run: AgentRun): Promise<void> {
  await h.waitFor(`${run.node.name} to exit or join`, () => run.exit !== null || h.joined(run.node.name), 120_000);
}

let clusterID = "";

it("bootstraps and joins while the broker's state is the one backed up", async () => {
  h.startAgent("ctrl-0");
  await h.waitFor("ctrl-0 to bootstrap", () => h.joined("ctrl-0"), 90_000);
  h.startAgent("ctrl-1");
  await h.waitFor("ctrl-1 to join", () => h.joined("ctrl-1"), 120_000);
  const [view] = await h.finalViews(["ctrl-0"]);
  clusterID = view!.clusterId;
  expect(view!.members).toHaveLength(2);
});

it("after a plain-copy restore, a node given the bootstrap ticket finds the cluster at the other controllers and refuses", async () => {
  await restoreBackup();
  const run = h.startAgent("ctrl-2", { args: [...h.agentArgs(h.node("ctrl-2")), ...controllers()] });
  await ending(run);
  expect(run.exit?.code, h.describeAgents()).toBe(3);
  expect(run.events.find((e) => e.step === "ticket")?.role).toBe("bootstrap");
  const refused = run.events[run.events.length - 1]!;
  expect(refused.step).toBe("refused");
  expect(refused.msg).toContain(`already serves cluster ${clusterID}`);
  expect(refused.msg).toContain("join-broker admin adopt");
  expect(refused.msg).toContain("abandoned");
  expect(run.events.some((e) => e.step === "etcd-start")).toBe(false);
  expect(run.stdout).toBe("");
  // Nothing started a second cluster: ctrl-2 serves nothing, and the cluster is as it was.
  expect((await h.etcd(h.node("ctrl-2").clientURL, 1_000).status()).ok).toBe(false);
  const [view] = await h.finalViews(["ctrl-0"]);
  expect([view!.clusterId, view!.members.length]).toEqual([clusterID, 2]);
});

it("gate mode refuses the same way before running its COMMAND", async () => {
  await restoreBackup();
  const ran = join(h.dir, "ctrl-3-command-ran");
  const run = h.startAgent("ctrl-3", { args: h.gateAgentArgs(h.node("ctrl-3"), `touch ${ran}`) });
  await ending(run);
  expect(run.exit?.code, h.describeAgents()).toBe(3);
  expect(run.events.find((e) => e.step === "ticket")?.role).toBe("bootstrap");
  expect(run.events[run.events.length - 1]?.msg).toContain(`already serves cluster ${clusterID}`);
  expect(run.events.some((e) => e.step === "exec")).toBe(false);
  expect(existsSync(ran)).toBe(false);
});

it("once an admin adopts the cluster, the refused node joins it", async () => {
  const member = (n: string) => ["--member", `${n}=${h.node(n).peerURL}`];
  const adopt = spawnSync(
    process.execPath,
    [
      join(ROOT, "bin/join-broker"),
      "admin",
      "adopt",
      "--cluster",
      h.cluster,
      "--broker",
      h.broker.url,
      "--admin-token",
      h.broker.adminToken,
      ...member("ctrl-0"),
      ...member("ctrl-1"),
    ],
    { cwd: ROOT, encoding: "utf8" },
  );
  expect(adopt.status, `${adopt.stdout}${adopt.stderr}`).toBe(0);

  const run = h.startAgent("ctrl-2", { args: [...h.agentArgs(h.node("ctrl-2")), ...controllers()] });
  await h.waitFor("ctrl-2 to join", () => h.joined("ctrl-2"), 120_000);
  expect(run.stdout).toContain(`joined cluster ${clusterID} as join`);
  const views = await h.finalViews(["ctrl-0", "ctrl-1", "ctrl-2"]);
  expect(new Set(views.map((v) => v.clusterId))).toEqual(new Set([clusterID]));
  expect(views[0]!.members.filter((m) => !m.isLearner)).toHaveLength(3);
  expect(hex(views[0]!.members[0]!.id)).toMatch(/^[0-9a-f]+$/);
});
