/**
 * The node agent (`join-broker join`) as a real process: its command line, the marker fast path,
 * handing etcd's flags to another supervisor, resuming after it joined, refusing when the broker
 * (or its own marker says) it joined but its data is gone (and the recovery its message describes), and refusing to
 * start etcd data it did not create.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEtcd } from "../../src/node/etcd/etcd-process.ts";
import { freePorts } from "../../scripts/ports.mjs";
import { ROOT } from "../support/broker.ts";
import { enrollCluster } from "../support/stack.ts";
import { ClusterHarness, hex } from "../support/cluster.ts";
import { expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { e2eSeed } from "../support/seeded.ts";

const BIN = join(ROOT, "bin/join-broker");

function agent(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [BIN, "join", ...args], { cwd: ROOT, encoding: "utf8", env: { ...process.env, ...env }, timeout: 60_000 });
}

describe("command line", () => {
  const base = [
    "--broker",
    "http://127.0.0.1:9",
    "--cluster",
    "prod",
    "--token",
    "jbe_x",
    "--node",
    "ctrl-1",
    "--peer-url",
    "http://127.0.0.1:2380",
    "--join-api",
    "http://127.0.0.1:9443",
  ];
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "join-broker-agent-cli-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("--help documents the flags and the exit codes", () => {
    const r = agent(["--help"]);
    expect(r.status).toBe(0);
    for (const flag of ["--broker", "--cluster", "--token", "--node", "--peer-url", "--join-api", "--state-dir", "--etcd-bin", "--data-dir", "--client-url"])
      expect(r.stdout).toContain(flag);
    expect(r.stdout).toMatch(/^ {2}0 {4}joined/m);
    expect(r.stdout).toMatch(/^ {2}2 {4}bad usage/m);
    expect(r.stdout).toMatch(/^ {2}3 {4}refused/m);
    expect(r.stdout).toMatch(/^ {2}4 {4}gave up/m);
  });

  it("bad usage exits 2 and says what is wrong", () => {
    const missing = agent(base);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain("--state-dir DIR is required");
    const badPeer = agent([...base.slice(0, 9), "http://127.0.0.1", ...base.slice(10), "--state-dir", dir]);
    expect(badPeer.status).toBe(2);
    expect(badPeer.stderr).toContain("must name a port");
    const reserved = agent([...base, "--state-dir", dir, "--etcd-arg=--initial-cluster-state=new"]);
    expect(reserved.status).toBe(2);
    expect(reserved.stderr).toContain("may not set --initial-cluster-state");
    const noToken = agent([...base.filter((a) => a !== "--token" && a !== "jbe_x"), "--state-dir", dir], { JOIN_BROKER_TOKEN: "" });
    expect(noToken.status).toBe(2);
    expect(noToken.stderr).toContain("enrollment token is required");
  });

  it("with the marker and without --etcd-bin it exits 0 at once, without asking the broker", () => {
    const stateDir = join(dir, "joined");
    mkdirSync(stateDir, { recursive: true });
    const marker = {
      version: 1,
      cluster: "prod",
      node: "ctrl-1",
      peerURL: "http://127.0.0.1:2380",
      role: "join",
      memberID: "42",
      clusterID: "cdf818194e3a8c32",
      ticket: "tkt_x",
      joinedAt: new Date().toISOString(),
    };
    writeFileSync(join(stateDir, "joined.json"), JSON.stringify(marker));
    // The broker URL points at a closed port: a call to it could only fail.
    const r = agent([...base, "--state-dir", stateDir]);
    expect(r.status).toBe(0);
    expect(r.stdout).toBe("joined cluster cdf818194e3a8c32 as join\n");
    // Another node's state dir is bad usage.
    const other = agent([...base.map((a) => (a === "ctrl-1" ? "ctrl-2" : a)), "--state-dir", stateDir]);
    expect(other.status).toBe(2);
    expect(other.stderr).toContain("not for ctrl-2");
  });
});

describe("against a broker, a join API and real etcd", () => {
  let h: ClusterHarness;
  beforeAll(async () => {
    h = await ClusterHarness.start({
      scenario: "agent",
      seed: e2eSeed("agent"),
      nodes: ["ctrl-0", "ctrl-1", "ctrl-2", "stray-0", "late-0", "typo-0", "nojoin-0"],
    });
  });
  afterAll(async () => {
    await h?.cleanup();
  });

  it("prints etcd's flags for another supervisor and continues once that etcd runs", async () => {
    const node = h.node("ctrl-0");
    const args = h.agentArgs(node);
    const i = args.indexOf("--etcd-bin");
    args.splice(i, 2, "--print-etcd-flags");
    const run = h.startAgent("ctrl-0", { args });
    await h.waitFor("etcd flags on stdout", () => run.stdout.includes("--initial-cluster-state=new"), 60_000);
    const flags = run.stdout.split("\n").filter((l) => l.startsWith("--"));
    expect(flags).toContain(`--name=ctrl-0`);
    expect(flags).toContain(`--initial-cluster=ctrl-0=${node.peerURL}`);
    expect(flags).toContain(`--initial-cluster-token=${h.cluster}`);
    expect(readFileSync(join(node.stateDir, "etcd-flags.txt"), "utf8").trim().split("\n")).toEqual(flags);
    // The other supervisor (here: the test) starts etcd with exactly those flags.
    const etcd = spawn(h.etcdBin, flags, { stdio: "ignore", detached: true });
    const x = await run.exited;
    expect(x.code).toBe(0);
    const status = await h.etcd(node.clientURL).status(node.clientURL);
    expect(status.ok).toBe(true);
    const id = status.ok ? hex(status.value.header.clusterId) : "";
    expect(run.stdout).toContain(`joined cluster ${id} as bootstrap`);
    expect(JSON.parse(readFileSync(join(node.stateDir, "joined.json"), "utf8"))).toMatchObject({
      cluster: h.cluster,
      node: "ctrl-0",
      role: "bootstrap",
      clusterID: id,
    });
    // Run again: the marker says it joined; nothing to start, exit 0 at once.
    const again = h.startAgent("ctrl-0", { args });
    expect((await again.exited).code).toBe(0);
    expect(again.stdout).toBe(`joined cluster ${id} as bootstrap\n`);
    etcd.unref();
  });

  it("after it joined, a killed agent started again takes its etcd back and reports the same cluster", async () => {
    h.startAgent("ctrl-1");
    h.startAgent("ctrl-2");
    await h.waitFor("ctrl-1 and ctrl-2 to join", () => h.joined("ctrl-1") && h.joined("ctrl-2"), 120_000);
    const first = await expectOneHealthyCluster(h, ["ctrl-0", "ctrl-1", "ctrl-2"]);
    // Kill the agent alone: its etcd runs on, orphaned.
    await h.kill("ctrl-1", "agent");
    const again = h.startAgent("ctrl-1");
    await h.waitFor("ctrl-1 to report joined again", () => h.joined("ctrl-1"), 60_000);
    expect(again.stdout).toBe(`joined cluster ${first.clusterId} as join\n`);
    expect(again.events.some((e) => e.step === "etcd-start" && /left running/.test(e.msg))).toBe(true);
    expect(again.events.some((e) => e.step === "ticket")).toBe(false); // the marker: no broker round trip
    await expectOneHealthyCluster(h, ["ctrl-0", "ctrl-1", "ctrl-2"]);
  });

  it("refuses when its marker, then the broker, says it joined but its data is gone, and joins again after the admin's recovery", async () => {
    const node = h.node("ctrl-2");
    expect((await h.stop("ctrl-2")).code).toBe(0);
    rmSync(node.dataDir, { recursive: true, force: true });
    // Its own marker says it joined: no etcd starts on the empty data dir, whatever the broker would say.
    const markerOnly = h.startAgent("ctrl-2");
    expect((await markerOnly.exited).code).toBe(3);
    expect(markerOnly.events.find((e) => e.step === "refused")?.msg).toMatch(
      /joined\.json says this node joined cluster \S+, but \S+ holds no etcd data\. This node will not start etcd\. To join it again/,
    );
    expect(markerOnly.events.some((e) => e.step === "etcd-start" || e.step === "ticket")).toBe(false);
    rmSync(node.stateDir, { recursive: true, force: true });

    const lost = h.startAgent("ctrl-2");
    expect((await lost.exited).code).toBe(3);
    const refused = lost.events.find((e) => e.step === "refused")!;
    expect(refused.msg).toMatch(/^the broker says ctrl-2 already joined cluster \S+ as member [0-9a-f]+, but \S+ holds no etcd data\./);
    expect(refused.msg).toContain(`join-broker admin forget ctrl-2 --cluster ${h.cluster}`);
    expect(lost.events.some((e) => e.step === "etcd-start")).toBe(false);
    expect(existsSync(join(node.dataDir, "member"))).toBe(false);

    // The recovery the message describes: remove the old member from etcd, forget it at the broker.
    const gateway = h.etcd(h.node("ctrl-0").clientURL);
    const list = await gateway.memberList();
    const old = list.ok ? list.value.members.find((m) => m.name === "ctrl-2") : undefined;
    expect(old).toBeDefined();
    expect((await gateway.memberRemove(old!.id)).ok).toBe(true);
    const forget = spawnSync(
      process.execPath,
      [BIN, "admin", "forget", "ctrl-2", "--cluster", h.cluster, "--broker", h.broker.url, "--admin-token", h.broker.adminToken],
      { cwd: ROOT, encoding: "utf8" },
    );
    expect(forget.status, forget.stderr).toBe(0);

    const rejoin = h.startAgent("ctrl-2");
    await h.waitFor("ctrl-2 to join again", () => h.joined("ctrl-2"), 120_000);
    expect(rejoin.events.find((e) => e.step === "admitted")?.role).toBe("join");
    const final = await expectOneHealthyCluster(h, ["ctrl-0", "ctrl-1", "ctrl-2"]);
    expect(final.ids.get("ctrl-2")).not.toBe(old!.id);
  });

  it("never starts etcd data it did not create, even with the bootstrap ticket", async () => {
    // stray-0 is the first node of a brand-new cluster, so the broker hands it the bootstrap
    // ticket; but its data dir already holds another etcd cluster's data.
    const node = h.node("stray-0");
    const [peer] = await freePorts(1);
    const foreign = await startEtcd({
      bin: h.etcdBin,
      name: "stray-0",
      dataDir: node.dataDir,
      // Data is data: the other cluster ran without TLS, on this node's client port.
      clientURL: node.clientURL.replace(/^https:/, "http:"),
      peerURL: `http://127.0.0.1:${peer}`,
      initialCluster: [`stray-0=http://127.0.0.1:${peer}`],
      initialClusterState: "new",
      initialClusterToken: "someone-else",
      startTimeoutMs: 60_000,
    });
    await foreign.stop();
    const cluster = "agent-stray";
    const token = await enrollCluster(h.broker, cluster);
    const args = h.agentArgs(node, { cluster, token });
    const run = h.startAgent("stray-0", { args });
    expect((await run.exited).code).toBe(3);
    expect(run.events.find((e) => e.step === "admitted")?.role).toBe("bootstrap");
    const refused = run.events.find((e) => e.step === "refused")?.msg;
    expect(refused).toContain("already holds etcd data");
    // Its turn is given up at once, not held until its lease ends.
    expect(refused).toMatch(/left the queue \(ticket tkt_\S+ abandoned\)/);
    const tickets = await h.client.admin(cluster).tickets();
    expect(tickets.body.tickets.map((t) => [t.node, t.state])).toEqual([["stray-0", "abandoned"]]);
    expect(run.events.some((e) => e.step === "etcd-start")).toBe(false);
    expect((await h.etcd(node.clientURL, 500).status(node.clientURL)).ok).toBe(false);
  });

  it("gives up after --timeout with exit 4 and leaves the queue, so the nodes behind it move on", async () => {
    // A paused cluster admits nobody: the node waits in the queue until its deadline (long enough
    // for a slow machine to start the agent and take the ticket before it).
    const cluster = "agent-late";
    const token = await enrollCluster(h.broker, cluster);
    expect((await h.client.admin(cluster).pause()).body.paused).toBe(true);
    const args = h.agentArgs(h.node("late-0"), { cluster, token, timeoutSeconds: 10 });
    const run = h.startAgent("late-0", { args });
    expect((await run.exited).code).toBe(4);
    expect(run.events.some((e) => e.step === "queued")).toBe(true);
    const gaveUp = run.events.find((e) => e.step === "gave-up")!;
    expect(gaveUp.msg).toContain("--timeout 10 s");
    expect(gaveUp.msg).toContain("abandoned");
    const tickets = await h.client.admin(cluster).tickets();
    expect(tickets.body.tickets.map((t) => [t.node, t.state])).toEqual([["late-0", "abandoned"]]);
  });

  it("gives its slot back when the join API stays out of reach for --join-api-patience, and queues again", async () => {
    // An adopted cluster: every node joins, and nojoin-0 is admitted at once.
    const cluster = "agent-nojoin";
    await h.client.admin(cluster).adopt([{ node: "elsewhere", peerURL: "https://10.9.9.9:2380" }]);
    const token = await enrollCluster(h.broker, cluster);
    const [closed] = await freePorts(1);
    const args = [...h.agentArgs(h.node("nojoin-0"), { cluster, token, joinApi: `http://127.0.0.1:${closed}` }), "--join-api-patience", "2"];
    const run = h.startAgent("nojoin-0", { args });
    // Given back: the first ticket is abandoned, and the node asks for a new place in the queue.
    await expect.poll(() => run.events.filter((e) => e.step === "ticket").length, { timeout: 60_000 }).toBeGreaterThanOrEqual(2);
    const lease = run.events.find((e) => e.step === "lease")!;
    expect(lease.msg).toMatch(
      new RegExp(
        `the join API http://127\\.0\\.0\\.1:${closed} could not be reached for 2 s \\(--join-api-patience; last: .*\\); left the queue \\(ticket tkt_\\S+ abandoned\\); asking for a ticket again`,
      ),
    );
    const { tickets } = (await h.client.admin(cluster).tickets()).body;
    expect(tickets[0].state).toBe("abandoned");
    expect(tickets.length).toBeGreaterThanOrEqual(2);
    run.proc.kill("SIGTERM");
    await run.exited;
  });

  it("names a wrong --cluster as a cluster the broker does not have, not as a bad token (exit 3)", async () => {
    const args = h.agentArgs(h.node("typo-0"), { cluster: "agent-typo" });
    const run = h.startAgent("typo-0", { args });
    expect((await run.exited).code).toBe(3);
    const refused = run.events.find((e) => e.step === "refused")!;
    expect(refused.msg).toContain("the broker has no cluster agent-typo: check --cluster");
    expect(refused.msg).not.toMatch(/enrollment token:/);
  });
});
