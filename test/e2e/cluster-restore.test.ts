/**
 * A self-hosted broker restored from a backup taken before its cluster formed, on real etcd: the
 * next node is not told to bootstrap (which would start a second cluster); once the admin adopts
 * the cluster that exists, it joins it.
 */
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ClusterHarness } from "../support/cluster.ts";
import { ROOT } from "../support/broker.ts";
import { e2eSeed } from "../support/seeded.ts";

const BIN = join(ROOT, "bin/join-broker");

describe("a broker restored from a backup older than its cluster", () => {
  let h: ClusterHarness;
  beforeAll(async () => {
    h = await ClusterHarness.start({ scenario: "restore", seed: e2eSeed("restore"), nodes: ["ctrl-0", "ctrl-1", "ctrl-2"], broker: { runtime: "serve" } });
  });
  afterAll(async () => {
    await h?.cleanup();
  });

  // Waits for the cluster to form (a join, etcd's 5 s window), the restored broker's restart,
  // the refused node's wait for the admin's adopt, and its own join.
  it("tells no node to bootstrap the cluster that formed after the backup; the admin's adopt lets it join", { timeout: 300_000 }, async () => {
    // The backup: serve stopped, its data directory copied, before any node asked.
    const backup = join(h.dir, "broker-backup");
    await h.broker.stop();
    cpSync(h.broker.persistDir, backup, { recursive: true });
    await h.broker.restart();

    for (const name of ["ctrl-0", "ctrl-1"]) {
      h.startAgent(name);
      await h.waitFor(`${name} joined`, () => h.joined(name), 120_000);
    }

    await h.broker.stop();
    const restored = spawnSync(process.execPath, [BIN, "serve", "restore", "--data-dir", h.broker.persistDir, "--from", backup], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(restored.status, restored.stderr).toBe(0);
    await h.broker.restart();

    const late = h.startAgent("ctrl-2");
    await h.waitFor("ctrl-2 told an admin must decide", () => late.events.some((e) => e.msg.includes("restored_awaiting_admin")), 60_000);
    expect(late.exit, "still running, waiting").toBeNull();
    const wal = join(h.node("ctrl-2").dataDir, "member", "wal");
    expect(existsSync(wal) && readdirSync(wal).length > 0, "ctrl-2 started no etcd").toBe(false);

    const adopted = await h.client.admin(h.cluster).adopt(["ctrl-0", "ctrl-1"].map((name) => ({ node: name, peerURL: h.node(name).peerURL })));
    expect(adopted.status, JSON.stringify(adopted.body)).toBe(200);
    await h.waitFor("ctrl-2 joined", () => h.joined("ctrl-2"), 180_000);
    expect(late.stdout).toMatch(/as join$/m);

    const views = await h.finalViews(["ctrl-0", "ctrl-1", "ctrl-2"]);
    expect(new Set(views.map((v) => v.clusterId)).size, "one cluster").toBe(1);
    expect(views[0]!.members).toHaveLength(3);
  });
});
