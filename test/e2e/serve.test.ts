/**
 * `join-broker serve` as a real process: its command line, and durability. State (tickets,
 * admissions, keys, audit, the alarm) survives SIGKILL of workerd, of serve, and of both; a lease
 * that fell due while the broker was down ends, by the alarm, when it is back; a data directory
 * copied away, wiped and restored carries on.
 */
import { spawn, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Writable } from "node:stream";
import { ROOT, admitted, brokerClient, enrollCluster, startBroker, type BrokerProcess } from "../support/stack.ts";
import { DataDirLocked } from "../../src/node/serve/data-dir.ts";
import { startSelfHosted, type ServeOptions } from "../../src/node/serve/start.ts";

const BIN = join(ROOT, "bin/join-broker");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Whether `pid` runs (a killed orphan may linger as a zombie until something reaps it). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

function serve(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [BIN, "serve", ...args], {
    cwd: ROOT,
    encoding: "utf8",
    env: { ...process.env, JOIN_BROKER_ADMIN_TOKEN: "serve-cli-token-0123456789", ...env },
    timeout: 60_000,
  });
}

/** A raw request that returns any status: for the failed-authentication limit, whose statuses and headers are the test. */
async function call(broker: BrokerProcess, method: string, path: string, token?: string, body?: unknown) {
  const res = await fetch(`${broker.url}${path}`, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

describe("command line", () => {
  it("--help explains every flag", () => {
    const r = serve(["--help"]);
    expect(r.status).toBe(0);
    for (const flag of ["--listen", "--data-dir", "--tls-cert", "--tls-key", "--insecure-http", "--admin-token-file", "--issuer", "--log-level"])
      expect(r.stdout).toContain(flag);
  });

  it("refuses bad usage with exit 2 and a data directory of a newer version with exit 1, starting nothing", () => {
    const dir = mkdtempSync(join(tmpdir(), "serve-cli-"));
    try {
      const plain = serve(["--listen", "0.0.0.0:0", "--data-dir", dir]);
      expect(plain.status).toBe(2);
      expect(plain.stderr).toContain("refusing plain HTTP on 0.0.0.0");
      const flagToken = serve(["--listen", "127.0.0.1:0", "--data-dir", dir, "--admin-token", "serve-cli-token-0123456789"]);
      expect(flagToken.status).toBe(2);
      // An admin token that no bearer header can carry is refused at start, naming what is allowed.
      const unusable = serve(["--listen", "127.0.0.1:0", "--data-dir", dir], { JOIN_BROKER_ADMIN_TOKEN: "Correct-Horse!Battery#Staple" });
      expect(unusable.status).toBe(2);
      expect(unusable.stderr).toContain("A-Z a-z 0-9 - . _ ~ + / (and = only at the end)");
      expect(unusable.stdout).not.toContain("listening on");
      writeFileSync(join(dir, "join-broker-data.json"), JSON.stringify({ format: 99, writtenBy: "99.0.0" }));
      const newer = serve(["--listen", "127.0.0.1:0", "--data-dir", dir]);
      expect(newer.status).toBe(1);
      expect(newer.stderr).toContain("was written by join-broker 99.0.0 in data format 99");
      expect(newer.stdout).not.toContain("listening on");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("process", () => {
  it("SIGTERM to serve alone stops workerd too and exits 0; a port in use makes it exit 1", async () => {
    const dir = mkdtempSync(join(tmpdir(), "serve-signal-"));
    try {
      const proc = spawn(process.execPath, [BIN, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir], {
        cwd: ROOT,
        env: { ...process.env, JOIN_BROKER_ADMIN_TOKEN: "serve-cli-token-0123456789" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      proc.stdout.on("data", (c: Buffer) => (out += c.toString()));
      proc.stderr.on("data", (c: Buffer) => (out += c.toString()));
      // "close": once its last lines are read too.
      const exited = new Promise<number | null>((r) => proc.once("close", (code) => r(code)));
      for (let i = 0; i < 600 && !/listening on http:\/\/127\.0\.0\.1:(\d+)/.test(out); i++) await sleep(100);
      const port = Number(/listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(out)![1]);
      const workerd = Number(readFileSync(join(dir, "run", "workerd.pid"), "utf8"));
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      // The admin token reaches workerd through its environment: no file under the data directory holds it.
      for (const name of readdirSync(join(dir, "run"))) expect(readFileSync(join(dir, "run", name), "utf8")).not.toContain("serve-cli-token-0123456789");
      expect(readFileSync(join(dir, "run", "workerd.capnp"), "utf8")).toContain('fromEnvironment = "JOIN_BROKER_ADMIN_TOKEN"');

      // A second serve on the same port (another data directory) cannot start: exit 1, and why.
      const other = mkdtempSync(join(tmpdir(), "serve-port-"));
      const taken = serve(["--listen", `127.0.0.1:${port}`, "--data-dir", other]);
      rmSync(other, { recursive: true, force: true });
      expect(taken.status).toBe(1);
      expect(taken.stderr).toContain("workerd exited during start");
      // A second serve on the same data directory refuses.
      const twice = serve(["--listen", "127.0.0.1:0", "--data-dir", dir]);
      expect(twice.status).toBe(1);
      expect(twice.stderr).toContain("another join-broker serve");

      proc.kill("SIGTERM");
      expect(await exited).toBe(0);
      expect(running(workerd)).toBe(false);
      expect(out).toContain("SIGTERM: stopping workerd");
      expect(out).toMatch(/workerd stopped on SIGTERM \((exit 0|SIGTERM)\)/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("one serve per data directory", () => {
  it("of two serves started at once on a new data directory, exactly one runs; the other is refused before it touches anything", async () => {
    const dir = join(mkdtempSync(join(tmpdir(), "serve-twice-")), "data");
    const quiet = () => new Writable({ write: (_c, _e, done) => done() });
    // Both in this process: no pid file nor command line tells them apart, only the lock can.
    const start = () =>
      startSelfHosted({ host: "127.0.0.1", port: 0, dataDir: dir, adminToken: "serve-cli-token-0123456789" } satisfies ServeOptions, {
        softwareVersion: "0.0.0-test",
        log: () => {},
        output: { stdout: quiet(), stderr: quiet() },
      });
    const results = await Promise.allSettled([start(), start()]);
    const running = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    try {
      const refused = results.flatMap((r) => (r.status === "rejected" ? [r.reason as Error] : []));
      expect(running).toHaveLength(1);
      expect(refused).toHaveLength(1);
      expect(refused[0]).toBeInstanceOf(DataDirLocked);
      expect((refused[0] as DataDirLocked).holderPid).toBe(process.pid);
      expect((await fetch(`${running[0]!.url}/healthz`)).status).toBe(200);
      expect(readdirSync(dir).sort()).toEqual(["durable-objects", "join-broker-data.json", "run", "serve.lock"]);
    } finally {
      await Promise.all(running.map((s) => s.stop()));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/**
 * The limit counts in windows of the clock's whole minutes: a burst that crossed into the next
 * minute would start its count again. Waits for a new minute unless 20 s of this one remain.
 */
async function aWholeMinuteWindowAhead(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 20_000) await new Promise((r) => setTimeout(r, left + 50));
}

describe("the failed-authentication limit (Cloudflare's AUTH_FAILURES binding, here local)", () => {
  let broker: BrokerProcess;
  // An admin token made of every character serve accepts: each one works in a bearer header.
  const everyCharacter = "AZaz09-._~+/admin-token==";
  beforeAll(async () => {
    const started = await startBroker({ runtime: "serve", args: ["--client-ip-header", "X-Forwarded-For"], env: { JOIN_BROKER_ADMIN_TOKEN: everyCharacter } });
    broker = { ...started, adminToken: everyCharacter };
  });
  afterAll(async () => broker?.stop(true));

  const fail = (headers: Record<string, string>) =>
    fetch(`${broker.url}/v1/admin/clusters/limits`, { headers: { authorization: "Bearer wrong-token", ...headers } }).then((r) => r.status);

  it("answers 429 after 20 failures a minute from one address, even with a forged cf-connecting-ip; other addresses are not affected", async () => {
    const statuses = [];
    await aWholeMinuteWindowAhead();
    for (let i = 0; i < 22; i++) statuses.push(await fail({ "x-forwarded-for": "10.9.9.9", "cf-connecting-ip": `192.0.2.${i}` }));
    expect(statuses.slice(0, 20)).toEqual(Array(20).fill(401));
    expect(statuses.slice(20)).toEqual([429, 429]);
    expect(await fail({ "x-forwarded-for": "10.9.9.10" })).toBe(401);
    // From the throttled address even the right token is refused; from any other it works.
    const right = (headers: Record<string, string>) =>
      fetch(`${broker.url}/v1/admin/clusters/limits/enrollment-tokens`, {
        method: "POST",
        headers: { authorization: `Bearer ${broker.adminToken}`, ...headers },
      }).then((r) => r.status);
    expect(await right({ "x-forwarded-for": "10.9.9.9" })).toBe(429);
    expect(await right({ "x-forwarded-for": "10.9.9.10" })).toBe(201);
  });
});

describe("the failed-authentication limit without --client-ip-header: one limit for every client", () => {
  let broker: BrokerProcess;
  beforeAll(async () => {
    broker = await startBroker({ runtime: "serve" });
  });
  afterAll(async () => broker?.stop(true));

  it("20 failures from one noisy client, whatever address it claims, and every client is answered 429 until the period ends", async () => {
    const enrollment = await enrollCluster(broker, "noisy");
    const statuses: number[] = [];
    await aWholeMinuteWindowAhead();
    for (let i = 0; i < 21; i++) {
      const forged = { "x-forwarded-for": `10.8.8.${i}`, "cf-connecting-ip": `192.0.2.${i}`, "x-real-ip": `198.51.100.${i}` };
      statuses.push(
        await fetch(`${broker.url}/v1/admin/clusters/noisy`, { headers: { authorization: "Bearer wrong-token", ...forged } }).then((r) => r.status),
      );
    }
    expect(statuses).toEqual([...Array(20).fill(401), 429]);
    // Everyone else, with right tokens: refused before any comparison, told when to come back.
    // Raw: the status, code and Retry-After on the wire are what is tested.
    const admin = await call(broker, "GET", "/v1/admin/clusters/noisy", broker.adminToken);
    const agent = await call(broker, "POST", "/v1/clusters/noisy/tickets", enrollment, { node: "n1", peerURL: "https://10.0.0.1:2380" });
    for (const r of [admin, agent]) expect({ status: r.status, code: r.body.code }).toEqual({ status: 429, code: "rate_limited" });
    const res = await fetch(`${broker.url}/v1/admin/clusters/noisy`, { headers: { authorization: `Bearer ${broker.adminToken}` } });
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(Number(res.headers.get("retry-after"))).toBeLessThanOrEqual(60);
    // What needs no credential still answers.
    expect((await fetch(`${broker.url}/v1/clusters/noisy/jwks.json`)).status).toBe(200);
  });
});

describe("durability", () => {
  const cluster = "durable";
  let broker: BrokerProcess;
  let enrollment: string;
  let n1: { ticket: string; admission: string };
  let n2: string;
  let kid: string;

  beforeAll(async () => {
    broker = await startBroker({ runtime: "serve" });
    // A lease that outlasts a restart of workerd however slow the machine (the test below makes one fall due on purpose).
    enrollment = await enrollCluster(broker, cluster, { policy: { leaseSeconds: 60, admissionTtlSeconds: 120 } });
    const boot = admitted((await node(enrollment).requestTicket("n0", "http://10.0.0.10:2380")).body);
    expect(boot.role).toBe("bootstrap");
    await node(boot.admission).complete(boot.ticket, "1001");
    kid = String((await node().jwks()).body.keys[0]!.kid);
  });
  afterAll(async () => broker?.stop(true));

  const admin = () => brokerClient(broker).admin(cluster);
  /** The cluster's node API with a node's bearer (introspection and keys need none). */
  const node = (bearer?: string) => brokerClient(broker, { bearer }).cluster(cluster);
  const status = async () => (await admin().status()).body;
  const audit = async () => (await admin().audit({ limit: 1000 })).body.entries;

  it("SIGKILL of workerd mid-queue: serve restarts it and the queue is as it was", async () => {
    const t1 = await node(enrollment).requestTicket("n1", "http://10.0.0.11:2380");
    expect(t1.status).toBe(201);
    n1 = { ticket: t1.body.ticket, admission: admitted(t1.body).admission };
    // Keep n1's lease alive across this restart.
    const hb = setInterval(
      () =>
        void node(n1.admission)
          .heartbeat(n1.ticket)
          .catch(() => {}),
      300,
    );
    try {
      const t2 = await node(enrollment).requestTicket("n2", "http://10.0.0.12:2380");
      expect(t2.status).toBe(202);
      n2 = t2.body.ticket;
      const before = await audit();
      await broker.kill("workerd");
      const again = await node(enrollment).ticket(n2);
      expect(again.body).toMatchObject({ ticket: n2, state: "queued", position: 1 });
      expect((await audit()).slice(0, before.length)).toEqual(before);
      expect((await node().introspect(n1.admission)).body.active).toBe(true);
    } finally {
      clearInterval(hb);
    }
  });

  it("SIGKILL of serve and workerd: a lease that fell due while down ends by the alarm when it is back", async () => {
    // A short lease now: long enough that it cannot fall due before the SIGKILL lands, short
    // enough to fall due while nothing runs.
    await admin().setPolicy({ leaseSeconds: 5 });
    await node(n1.admission).heartbeat(n1.ticket);
    const stopped = Date.now();
    await broker.stop(true);
    expect(Date.now() - stopped, "serve and workerd were killed before n1's lease fell due").toBeLessThan(5_000);
    await sleep(6_000); // n1's 5 s lease falls due while nothing runs
    const from = broker.output().length;
    await broker.restart();
    // No request reaches the cluster: the alarm alone must end the lease and admit n2.
    for (let i = 0; i < 600 && !broker.output().slice(from).includes('"event":"ticket.admitted"'); i++) await sleep(100);
    const woke = broker.output().slice(from);
    expect(woke).toMatch(new RegExp(`"event":"lease.expired"[^\\n]*"subject":"${n1.ticket}"`));
    expect(woke).toMatch(new RegExp(`"event":"ticket.admitted"[^\\n]*"subject":"${n2}"`));
    expect((await node().introspect(n1.admission)).body).toMatchObject({
      active: false,
    });
    const t2 = admitted((await node(enrollment).ticket(n2)).body);
    expect((await node().jwks()).body.keys.map((k) => k.kid)).toContain(kid);
    // From here on n2 keeps its slot: a long lease, extended at once.
    await admin().setPolicy({ leaseSeconds: 60 });
    await node(t2.admission).heartbeat(n2);
  });

  it("SIGKILL of serve alone: the next serve replaces the workerd it left behind", async () => {
    const orphan = Number(readFileSync(join(broker.persistDir, "run", "workerd.pid"), "utf8"));
    await broker.kill("serve");
    expect(running(orphan)).toBe(true);
    await broker.restart();
    expect(running(orphan)).toBe(false);
    expect((await status()).bootstrapped).toBe(true);
    expect((await node(enrollment).ticket(n2)).body.state).toBe("admitted");
  });

  it("backup, wipe, restore: the queue carries on", async () => {
    const t3 = await node(enrollment).requestTicket("n3", "http://10.0.0.13:2380");
    expect(t3.status).toBe(202);
    const n2Admission = admitted((await node(enrollment).ticket(n2)).body).admission;
    const auditBefore = await audit();
    await broker.stop();
    const backup = mkdtempSync(join(tmpdir(), "serve-backup-"));
    try {
      cpSync(broker.persistDir, backup, { recursive: true });
      rmSync(broker.persistDir, { recursive: true, force: true });
      await broker.restart();
      await expect(admin().status()).rejects.toMatchObject({ status: 404 });
      await broker.stop();
      rmSync(broker.persistDir, { recursive: true, force: true });
      cpSync(backup, broker.persistDir, { recursive: true });
      await broker.restart();
    } finally {
      rmSync(backup, { recursive: true, force: true });
    }
    expect(await audit()).toEqual(auditBefore);
    // n2 completes; n3, queued behind it before the backup, is admitted.
    await node(n2Admission).complete(n2, "1002");
    const polled = await node(enrollment).ticket(t3.body.ticket, 10);
    expect(polled.body.state).toBe("admitted");
  });
});
