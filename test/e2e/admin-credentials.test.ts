/**
 * Read-only admin credentials as an operator uses them: the real `join-broker admin` bin against
 * `join-broker serve`. The admin makes, lists and revokes them; with one, every read command
 * works and every write exits 3 with the broker's `forbidden`, changing nothing. Then the admin
 * token is rotated the two ways serve takes it (--admin-token-file, DIR/admin-token): after a
 * restart the old one is refused, the new one works, and the read-only credentials still do.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startBroker, type BrokerProcess } from "../support/broker.ts";
import { runAdmin } from "../support/admin-run.ts";

const children = new Set<ChildProcess>();
const brokers: BrokerProcess[] = [];

/** `join-broker admin …args` with only the JOIN_BROKER_* variables given here. */
const admin = (args: string[], env: Record<string, string> = {}) => runAdmin(args, { env, live: children });

afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  for (const b of brokers) await b.stop();
});

const OLD = "old-admin-token-0123456789abcdef";
const NEW = "new-admin-token-fedcba9876543210";

describe("read-only credentials with the admin CLI, and rotating serve's admin token", () => {
  let broker: BrokerProcess;
  let tokenFile: string;
  const as = (token: string, cluster?: string) => [...(cluster ? ["--cluster", cluster] : []), "--broker", broker.url, "--admin-token", token];
  const json = async (args: string[]) => {
    const r = await admin([...args, "--json"]);
    if (r.code !== 0) throw new Error(`join-broker admin ${args.join(" ")} exited ${r.code}:\n${r.stderr}${r.stdout}`);
    return JSON.parse(r.stdout);
  };
  let reader: { id: string; token: string };
  let scoped: { id: string; token: string };

  beforeAll(async () => {
    tokenFile = join(mkdtempSync(join(tmpdir(), "join-broker-token-")), "admin-token");
    writeFileSync(tokenFile, `${OLD}\n`, { mode: 0o600 });
    broker = await startBroker({ runtime: "serve", args: ["--admin-token-file", tokenFile] });
    brokers.push(broker);
    for (const c of ["cred-a", "cred-b"]) expect((await admin(["token", "create", "--new-cluster", ...as(OLD, c)])).code).toBe(0);
  });

  it("the admin makes them: the secret shown once, never listed", async () => {
    reader = await json(["credentials", "create", "--read-only", "--description", "prometheus", ...as(OLD)]);
    expect(reader).toMatchObject({
      id: expect.stringMatching(/^jbc_/),
      token: expect.stringMatching(/^jbr_/),
      readOnly: true,
      cluster: null,
      description: "prometheus",
    });
    const human = await admin(["credentials", "create", "--read-only", ...as(OLD, "cred-a")]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^Created read-only credential jbc_\w+ for cluster cred-a\.$/m);
    scoped = { id: human.stdout.match(/credential (jbc_\w+)/)![1], token: human.stdout.match(/^(jbr_\S+)$/m)![1] };

    const listed = await json(["credentials", "list", ...as(OLD)]);
    expect(listed.credentials.map((c: { id: string; cluster: string | null }) => [c.id, c.cluster])).toEqual([
      [reader.id, null],
      [scoped.id, "cred-a"],
    ]);
    const table = (await admin(["credentials", "list", ...as(OLD)])).stdout;
    expect(table).toMatch(new RegExp(`${reader.id}\\s+active\\s+\\(all\\)\\s+.*prometheus`));
    expect(table + JSON.stringify(listed)).not.toContain("jbr_");
    // Each creation is a log line: the broker-wide one from the index, the other with its audit entry.
    const logged = (id: string) =>
      broker
        .output()
        .split("\n")
        .some((l) => l.includes('"event":"admin_credential.created"') && l.includes(`"subject":"${id}"`));
    await expect.poll(() => [logged(reader.id), logged(scoped.id)], { timeout: 10_000 }).toEqual([true, true]);
    // Only --read-only credentials exist: asking for another kind is bad usage, and sends nothing.
    expect((await admin(["credentials", "create", ...as(OLD)])).code).toBe(2);
  });

  it("a read-only credential reads with every read command, by flag or by environment", async () => {
    for (const args of [["status"], ["tickets"], ["audit"], ["metrics"], ["policy"], ["token", "list"]]) {
      const r = await admin([...args, ...as(reader.token, "cred-a")]);
      expect({ args, code: r.code, stderr: r.stderr }).toEqual({ args, code: 0, stderr: "" });
    }
    expect((await admin(["clusters", ...as(reader.token)])).stdout).toMatch(/cred-a[\s\S]*cred-b/);
    const byEnv = await admin(["status", "--cluster", "cred-b"], { JOIN_BROKER_URL: broker.url, JOIN_BROKER_ADMIN_TOKEN: reader.token });
    expect(byEnv.code).toBe(0);
    expect(byEnv.stdout).toContain("cred-b");
  });

  // Waits for 17 admin processes one after another (each a Node start-up and the CLI's load).
  it("every write with it exits 3 with forbidden, and nothing changes", async () => {
    const state = async () => ({
      status: await json(["status", ...as(OLD, "cred-a")]),
      tokens: await json(["token", "list", ...as(OLD, "cred-a")]),
      credentials: await json(["credentials", "list", ...as(OLD)]),
      clusters: await json(["clusters", ...as(OLD)]),
    });
    const before = await state();
    const writes = [
      ["pause"],
      ["policy", "set", "--max-queue", "5"],
      ["token", "create"],
      ["token", "create", "--new-cluster", "--cluster", "cred-new"],
      ["keys", "rotate"],
      ["forget", "nobody"],
      ["credentials", "create", "--read-only"],
      ["credentials", "revoke", scoped.id],
      ["credentials", "list"],
    ];
    for (const args of writes) {
      const r = await admin([...args, ...as(reader.token, args.includes("--cluster") ? undefined : "cred-a")]);
      expect({ args, code: r.code }).toEqual({ args, code: 3 });
      expect(r.stderr).toContain("the broker refused: forbidden (HTTP 403)");
    }
    expect(await state()).toEqual({ ...before, status: { ...before.status, databaseSizeBytes: expect.any(Number) } });
  });

  it("one limited to a cluster reads that cluster only; revoked, it is refused", async () => {
    expect((await admin(["status", ...as(scoped.token, "cred-a")])).code).toBe(0);
    const other = await admin(["status", ...as(scoped.token, "cred-b")]);
    expect(other.code).toBe(3);
    expect(other.stderr).toContain("forbidden (HTTP 403)");
    expect((await json(["clusters", ...as(scoped.token)])).clusters.map((c: { name: string }) => c.name)).toEqual(["cred-a"]);

    const revoked = await admin(["credentials", "revoke", scoped.id, ...as(OLD)]);
    expect(revoked.stdout).toContain(`Revoked read-only credential ${scoped.id}.`);
    const after = await admin(["status", ...as(scoped.token, "cred-a")]);
    expect(after.code).toBe(3);
    expect(after.stderr).toContain("unauthorized (HTTP 401)");
    const audit = await json(["audit", ...as(OLD, "cred-a")]);
    expect(audit.entries.filter((e: { subject: string }) => e.subject === scoped.id).map((e: { action: string }) => e.action)).toEqual([
      "admin_credential.created",
      "admin_credential.revoked",
    ]);
  });

  it("--admin-token-file rotated: after a restart the old token is refused, the new one and the read-only credentials work", async () => {
    writeFileSync(tokenFile, `${NEW}\n`, { mode: 0o600 });
    await broker.restart();
    const old = await admin(["status", ...as(OLD, "cred-a")]);
    expect(old.code).toBe(3);
    expect(old.stderr).toContain("unauthorized (HTTP 401)");
    expect((await admin(["pause", ...as(NEW, "cred-a")])).code).toBe(0);
    expect((await json(["status", ...as(reader.token, "cred-a")])).paused).toBe(true);
  });

  it("DIR/admin-token rotated the same way", async () => {
    // No token given: serve makes one in DIR/admin-token, and reads that file at every start.
    const selfMade = await startBroker({ runtime: "serve", env: { JOIN_BROKER_ADMIN_TOKEN: "" } });
    brokers.push(selfMade);
    const file = join(selfMade.persistDir, "admin-token");
    const first = readFileSync(file, "utf8").trim();
    const on = (token: string, cluster?: string) => [...(cluster ? ["--cluster", cluster] : []), "--broker", selfMade.url, "--admin-token", token];
    expect((await admin(["token", "create", "--new-cluster", ...on(first, "cred-c")])).code).toBe(0);
    const r = await admin(["credentials", "create", "--read-only", "--json", ...on(first)]);
    const kept = JSON.parse(r.stdout) as { token: string };
    writeFileSync(file, `${NEW}\n`, { mode: 0o600 });
    await selfMade.restart();
    expect((await admin(["status", ...on(first, "cred-c")])).code).toBe(3);
    expect((await admin(["status", ...on(NEW, "cred-c")])).code).toBe(0);
    expect((await admin(["status", ...on(kept.token, "cred-c")])).code).toBe(0);
  });
});
