/**
 * What the agent prints when its output is not a terminal (a service's log), as a real process:
 * a broker that cannot be reached is reported at once and then at most every 10 s, with the error,
 * instead of nothing until --timeout; a queued node says what it waits for, and a stopped one
 * says nothing about an etcd it never started.
 */
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePorts } from "../../scripts/ports.mjs";
import { BIN, brokerClient, enrollCluster, joinArgv, ROOT, startBroker, type BrokerProcess, type JoinArgs } from "../support/stack.ts";

/**
 * Starts the agent's `join` for `a` with its output on pipes, its state in a new directory, and a
 * join API nobody is asked for: `all` is stdout and stderr as they came, `stderr` alone.
 */
function startAgent(a: Pick<JoinArgs, "broker" | "cluster" | "token" | "node" | "peerURL" | "timeoutSeconds">) {
  const stateDir = mkdtempSync(join(tmpdir(), "join-broker-agent-out-"));
  const child = spawn(process.execPath, [BIN, ...joinArgv({ ...a, joinApi: "http://127.0.0.1:9443", stateDir })], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output = { all: "", stderr: "" };
  child.stdout.on("data", (d) => (output.all += d));
  child.stderr.on("data", (d) => {
    output.all += d;
    output.stderr += d;
  });
  return { child, output };
}

/** Runs the agent to its end; each line carries the agent's own timestamp. */
function run(a: Parameters<typeof startAgent>[0]): Promise<{ code: number | null; lines: { text: string }[] }> {
  return new Promise((resolve, reject) => {
    const { child } = startAgent(a);
    const lines: { text: string }[] = [];
    let partial = "";
    const take = (chunk: Buffer) => {
      partial += chunk.toString();
      const parts = partial.split("\n");
      partial = parts.pop()!;
      for (const text of parts) lines.push({ text });
    };
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, lines }));
  });
}

describe("agent output without a terminal", () => {
  it("logs an unreachable broker at once, with the error, then again at most every 10 s", async () => {
    const [closed] = await freePorts(1);
    const r = await run({
      broker: `http://127.0.0.1:${closed}`,
      cluster: "prod",
      token: "jbe_x",
      node: "ctrl-1",
      peerURL: "https://10.0.0.11:2380",
      timeoutSeconds: 14,
    });
    expect(r.code).toBe(4);
    const failures = r.lines.filter((l) => / ctrl-1 retry: .*broker unreachable/.test(l.text));
    expect(failures.length).toBeGreaterThanOrEqual(1);
    expect(failures[0].text).toContain(`ECONNREFUSED 127.0.0.1:${closed}`);
    // Timed by the agent's own timestamps, not by when this busy test process read the lines:
    // at once after the start line (how long node takes to start is the machine's business), not
    // at --timeout; then at most every 10 s.
    const stamp = (l: { text: string }) => Date.parse(l.text.slice(0, l.text.indexOf(" ")));
    const startLine = r.lines.find((l) => / ctrl-1 start/.test(l.text));
    expect(startLine, r.lines.map((l) => l.text).join("\n")).toBeDefined();
    expect(stamp(failures[0])).not.toBeNaN();
    expect(stamp(failures[0]) - stamp(startLine!)).toBeLessThan(5_000);
    for (let i = 1; i < failures.length; i++) expect(stamp(failures[i]) - stamp(failures[i - 1])).toBeGreaterThanOrEqual(9_900);
    expect(failures.length).toBeLessThanOrEqual(2);
    expect(r.lines.at(-1)!.text).toContain("gave-up");
  });
});

describe("agent output across a broker outage", () => {
  it("says once that the broker is reachable again, with how long it was not, and carries on", async () => {
    const broker = await startBroker();
    try {
      const cluster = "outage";
      const token = await enrollCluster(broker, cluster);
      await broker.stop();
      const { child, output } = startAgent({ broker: broker.url, cluster, token, node: "ctrl-1", peerURL: "https://10.0.0.11:2380", timeoutSeconds: 170 });
      try {
        await expect.poll(() => output.all, { timeout: 60_000, interval: 200 }).toMatch(/ ctrl-1 retry: .*broker unreachable/);
        await broker.restart();
        await expect.poll(() => output.all, { timeout: 60_000, interval: 200 }).toMatch(/ ctrl-1 ticket: ticket tkt_\S+: admitted \(bootstrap\)/);
        const lines = output.all.split("\n");
        const back = lines.filter((l) => / ctrl-1 reachable: /.test(l));
        expect(back, output.all).toEqual([expect.stringMatching(/ ctrl-1 reachable: the broker is reachable again after \d+ s \(\d+ failed attempts?\)$/)]);
        // Said once, after the failures and before the answer it was waiting for.
        const at = (re: RegExp) => lines.findIndex((l) => re.test(l));
        expect(at(/ reachable: /)).toBeGreaterThan(at(/ retry: .*broker unreachable/));
        expect(at(/ reachable: /)).toBeLessThan(at(/ ticket: ticket tkt_/));
      } finally {
        child.kill("SIGKILL");
      }
    } finally {
      await broker.stop();
    }
  });
});

describe("agent output while queued", () => {
  let broker: BrokerProcess;
  beforeAll(async () => {
    broker = await startBroker();
  });
  afterAll(async () => {
    await broker?.stop();
  });

  it("Ctrl-C on a queued node says it stopped, and nothing about an etcd it never started", async () => {
    const cluster = "ctrl-c";
    const token = await enrollCluster(broker, cluster);
    // ctrl-1 holds the bootstrap ticket and never finishes: ctrl-2 waits behind it.
    const boot = await brokerClient(broker, { bearer: token }).cluster(cluster).requestTicket("ctrl-1", "https://10.0.0.11:2380");
    expect(boot.status).toBe(201);
    const { child, output } = startAgent({ broker: broker.url, cluster, token, node: "ctrl-2", peerURL: "https://10.0.0.12:2380" });
    await expect
      .poll(() => output.stderr, { timeout: 30_000 })
      .toMatch(/ctrl-2 queued: position 1 in the queue; waiting for the bootstrap node ctrl-1 to start the cluster/);
    const code = new Promise((r) => child.on("close", r));
    child.kill("SIGINT");
    expect(await code).toBe(130);
    expect(output.stderr).toMatch(/ctrl-2 stopping: stopped by SIGINT\. Run the same command again to resume\.\n/);
    expect(output.stderr).not.toContain("etcd");
  });
});
