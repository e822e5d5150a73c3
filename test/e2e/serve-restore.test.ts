/**
 * `join-broker serve restore`: a backup taken before a cluster formed, restored after it formed,
 * must not make the broker hand out a second bootstrap. Every cluster that looks never
 * bootstrapped in the restored state waits for an admin's decision.
 */
import { spawn, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, brokerClient, enrollCluster, joinArgv, ROOT, startBroker, type BrokerProcess } from "../support/stack.ts";

// Raw: the status, problem code and Retry-After of a refused ticket are what these tests judge.
async function ask(broker: BrokerProcess, cluster: string, token: string, node: string, n: number) {
  const res = await fetch(`${broker.url}/v1/clusters/${cluster}/tickets`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ node, peerURL: `http://10.0.0.${n}:2380` }),
  });
  return { status: res.status, retryAfter: res.headers.get("retry-after"), body: (await res.json()) as any };
}

async function complete(broker: BrokerProcess, cluster: string, view: { ticket: string; admission: string }, memberID: string) {
  await brokerClient(broker, { bearer: view.admission }).cluster(cluster).complete(view.ticket, memberID);
}

const restoreCli = (args: string[]) => spawnSync(process.execPath, [BIN, "serve", "restore", ...args], { cwd: ROOT, encoding: "utf8", timeout: 60_000 });

describe("serve restore", () => {
  let broker: BrokerProcess;
  let backup: string;
  const tokens: Record<string, string> = {};

  beforeAll(async () => {
    broker = await startBroker({ runtime: "serve" });
    backup = join(mkdtempSync(join(tmpdir(), "serve-restore-")), "copy");
  });
  afterAll(async () => {
    await broker?.stop(true);
    rmSync(join(backup, ".."), { recursive: true, force: true });
  });

  it("after a backup from before the bootstrap is restored, no node is told to bootstrap the cluster that formed since", async () => {
    for (const c of ["formed", "never"]) tokens[c] = await enrollCluster(broker, c);
    // The backup: serve stopped, the data directory copied, before any node asked.
    await broker.stop();
    cpSync(broker.persistDir, backup, { recursive: true });
    await broker.restart();
    const b0 = await ask(broker, "formed", tokens.formed, "b0", 1);
    expect(b0.body).toMatchObject({ role: "bootstrap", state: "admitted" });
    await complete(broker, "formed", b0.body, "1");
    const j1 = await ask(broker, "formed", tokens.formed, "j1", 2);
    expect(j1.body).toMatchObject({ role: "join", state: "admitted" });
    await complete(broker, "formed", j1.body, "2");

    // The restore, by the documented path, serve stopped. A running serve refuses it.
    const busy = restoreCli(["--data-dir", broker.persistDir, "--from", backup]);
    expect(busy.status).toBe(1);
    expect(busy.stderr).toContain("another join-broker serve");
    await broker.stop();
    const restored = restoreCli(["--data-dir", broker.persistDir, "--from", backup]);
    expect(restored.status, restored.stderr).toBe(0);
    expect(restored.stdout).toContain("waits for an admin");
    await broker.restart();

    for (const [node, n] of [
      ["n2", 3],
      ["b0", 1],
    ] as const) {
      const r = await ask(broker, "formed", tokens.formed, node, n);
      expect([r.status, r.body.code], node).toEqual([503, "restored_awaiting_admin"]);
      expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
    }
    const status = (await brokerClient(broker).admin("formed").status()).body;
    expect(status).toMatchObject({ bootstrapped: false, bootstrapNode: null, restored: { awaitingAdmin: true } });

    // The admin's way out: the cluster exists.
    const adopted = spawnSync(
      process.execPath,
      [BIN, "admin", "adopt", "--cluster", "formed", "--broker", broker.url, "--member", "b0=http://10.0.0.1:2380", "--member", "j1=http://10.0.0.2:2380"],
      { cwd: ROOT, encoding: "utf8", env: { ...process.env, JOIN_BROKER_ADMIN_TOKEN: broker.adminToken }, timeout: 60_000 },
    );
    expect(adopted.status, adopted.stderr).toBe(0);
    expect((await ask(broker, "formed", tokens.formed, "n2", 3)).body).toMatchObject({ role: "join", state: "admitted" });
    expect((await ask(broker, "formed", tokens.formed, "b0", 1)).body).toMatchObject({ state: "joined" });

    // The other way out, for a cluster that never formed.
    expect((await ask(broker, "never", tokens.never, "m0", 9)).body.code).toBe("restored_awaiting_admin");
    const allowed = spawnSync(
      process.execPath,
      [BIN, "admin", "bootstrap", "allow", "--cluster", "never", "--broker", broker.url, "--reason", "it never formed"],
      {
        cwd: ROOT,
        encoding: "utf8",
        env: { ...process.env, JOIN_BROKER_ADMIN_TOKEN: broker.adminToken },
        timeout: 60_000,
      },
    );
    expect(allowed.status, allowed.stderr).toBe(0);
    expect((await ask(broker, "never", tokens.never, "m0", 9)).body).toMatchObject({ role: "bootstrap", state: "admitted" });
  });

  it("takes note of a restore once: later starts, and clusters made after it, are not held back", async () => {
    const fresh = await enrollCluster(broker, "later");
    await broker.stop();
    await broker.restart();
    expect((await ask(broker, "later", fresh, "x0", 20)).body).toMatchObject({ role: "bootstrap", state: "admitted" });
    const formed = brokerClient(broker).admin("formed");
    expect((await formed.status()).body.restored.awaitingAdmin).toBe(false);
    const audit = (await formed.audit({ limit: 1000 })).body.entries.map((e) => e.action);
    expect(audit.filter((a) => a === "cluster.restored")).toHaveLength(1);
  });

  it("the agent of a node that would bootstrap waits, saying an admin must decide, without asking more often than Retry-After", async () => {
    const token = await enrollCluster(broker, "pitr");
    // Cloudflare's point-in-time restore has no serve restore: the admin marks the cluster.
    expect((await brokerClient(broker).admin("pitr").markRestored("point-in-time restore")).body).toEqual({ awaitingAdmin: true });
    const state = mkdtempSync(join(tmpdir(), "serve-restore-agent-"));
    const child = spawn(
      process.execPath,
      [
        BIN,
        ...joinArgv({
          broker: broker.url,
          cluster: "pitr",
          token,
          node: "p0",
          peerURL: "https://10.0.0.30:2380",
          joinApi: "http://127.0.0.1:9",
          stateDir: state,
          timeoutSeconds: 8,
          logFormat: "json",
        }),
      ],
      { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
    );
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr.on("data", (c: Buffer) => (out += c.toString()));
    const code = await new Promise<number | null>((r) => child.on("close", r));
    rmSync(state, { recursive: true, force: true });
    const lines = out.split("\n").filter(Boolean);
    const waiting = lines.filter((l) => l.includes("restored_awaiting_admin"));
    // Told, at once, and asked again no sooner than the broker's Retry-After (30 s): once in 8 s.
    expect(waiting.length, out).toBe(1);
    expect(waiting[0]).toMatch(/admin/);
    expect(code, "gave up at its --timeout, not before: no crash, no refusal").toBe(4);
    expect((await brokerClient(broker).admin("pitr").tickets()).body.tickets).toEqual([]);
  }, 30_000);
});
