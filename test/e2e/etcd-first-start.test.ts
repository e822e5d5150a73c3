/**
 * A bootstrap node whose etcd was killed within its first start, after etcd made its
 * write-ahead log and before raft wrote the cluster's first member to it (a power cut at first
 * boot; the demo's fault schedule once killed it there). etcd restarted on that data takes it as
 * its own, knows no voter and never elects a leader: the cluster could never form. The WAL as
 * etcd left it then is test/fixtures/etcd-wal/; the etcd under test judges it, then the agent.
 */
import { mkdirSync, readFileSync, readdirSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEtcd, type EtcdProcess } from "../../src/node/etcd/etcd-process.ts";
import { raftWroteData } from "../../src/node/agent/files/etcd-wal.ts";
import { ROOT } from "../support/broker.ts";
import { ClusterHarness } from "../support/cluster.ts";
import { expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { TEST_TIMING, memberAddress, startSingleNodeEtcd, type TestEtcd } from "../support/etcd.ts";
import { e2eSeed } from "../support/seeded.ts";

/** The size etcd preallocates a WAL file to; what it wrote is followed by zeros. */
const WAL_BYTES = 64_000_000;

/** Puts the cut WAL in `dataDir` as etcd left it. */
function placeCutWal(dataDir: string): void {
  const wal = join(dataDir, "member", "wal");
  mkdirSync(wal, { recursive: true, mode: 0o700 });
  const file = join(wal, "0000000000000000-0000000000000000.wal");
  writeFileSync(file, readFileSync(join(ROOT, "test/fixtures/etcd-wal/first-start-cut.wal")), { mode: 0o600 });
  truncateSync(file, WAL_BYTES);
}

describe("etcd's write-ahead log after a first start cut short", () => {
  let etcd: TestEtcd;
  const started: EtcdProcess[] = [];
  beforeAll(async () => {
    etcd = await startSingleNodeEtcd({ name: "wal-0" });
  });
  afterAll(async () => {
    await Promise.all(started.map((p) => p.stop(3_000)));
    await etcd?.cleanup();
  });

  it("reads as written for etcd's own data, as unwritten for the cut WAL; etcd restarted on it commits nothing and cannot publish itself", async () => {
    const own = etcd.first;
    expect(raftWroteData(own.dataDir)).toBe(true);
    await own.stop(5_000);
    expect(raftWroteData(own.dataDir)).toBe(true);

    const cut = join(etcd.dir, "cut-0");
    placeCutWal(cut);
    expect(raftWroteData(cut)).toBe(false);

    const address = await memberAddress("cut-0");
    const stuck = await startEtcd({
      bin: etcd.bin,
      ...address,
      ...TEST_TIMING,
      dataDir: cut,
      initialCluster: [`cut-0=${address.peerURL}`],
      initialClusterState: "new",
      logFile: join(etcd.dir, "cut-0.log"),
      waitFor: "none",
    });
    started.push(stuck);
    // etcd's own verdict: it restarts on the data with nothing committed, and no raft round
    // publishes it (its request timeout: about 6.5 s with these timings).
    const deadline = Date.now() + 60_000;
    while (!/failed to publish local member to cluster through raft/.test(stuck.logTail(200)) && Date.now() < deadline) {
      expect(stuck.running(), stuck.logTail(40)).toBe(true);
      await new Promise((r) => setTimeout(r, 200));
    }
    const log = stuck.logTail(200);
    expect(log).toMatch(/restarting local member.*"commit-index":\s*0\b/);
    expect(log).toMatch(/failed to publish local member to cluster through raft/);
    expect(log).not.toMatch(/elected leader|became leader/);
  }, 90_000);
});

describe("the agent on its own bootstrap data that raft never wrote to", () => {
  let h: ClusterHarness;
  beforeAll(async () => {
    h = await ClusterHarness.start({ scenario: "first-start-cut", seed: e2eSeed("first-start-cut"), nodes: ["ctrl-0", "ctrl-1"] });
  });
  afterAll(async () => {
    await h?.cleanup();
  });

  it("sets the data aside and starts the new cluster afresh, and the next node joins it", async () => {
    const node = h.node("ctrl-0");
    // What a run killed right after it started etcd leaves: its record of the data dir, and the WAL.
    const at = new Date().toISOString();
    writeFileSync(
      join(node.stateDir, "agent-state.json"),
      JSON.stringify({
        version: 1,
        cluster: h.cluster,
        node: node.name,
        peerURL: node.peerURL,
        updatedAt: at,
        etcd: {
          cluster: h.cluster,
          node: node.name,
          role: "bootstrap",
          ticket: "tkt_earlier",
          initialCluster: [`${node.name}=${node.peerURL}`],
          initialClusterState: "new",
          at,
        },
      }),
    );
    placeCutWal(node.dataDir);

    const run = h.startAgent("ctrl-0");
    await h.waitFor("ctrl-0 to bootstrap the cluster", () => h.joined("ctrl-0"), 120_000);
    const aside = run.events.find((e) => e.step === "etcd-start" && /holds nothing/.test(e.msg));
    expect(aside?.msg, run.stdout).toMatch(/before it wrote the cluster's first member/);
    const moved = readdirSync(join(node.dataDir, "..")).filter((f) => f.startsWith("etcd.unwritten-"));
    expect(moved).toHaveLength(1);
    expect(raftWroteData(join(node.dataDir, "..", moved[0]!))).toBe(false);
    expect(raftWroteData(node.dataDir)).toBe(true);

    h.startAgent("ctrl-1");
    await h.waitFor("ctrl-1 to join", () => h.joined("ctrl-1"), 120_000);
    await expectOneHealthyCluster(h, ["ctrl-0", "ctrl-1"]);
  }, 300_000);
});
