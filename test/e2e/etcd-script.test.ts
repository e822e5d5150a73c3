/**
 * scripts/etcd.mjs as a command: its answers, its errors, and two processes building the same
 * release at once into an empty cache (Go's caches are warm: `npm test` built every version
 * first) while a lock left by a dead process lies there.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ETCD_MINORS, binaryRelease, etcdPin } from "../../scripts/etcd.mjs";
import { ROOT } from "../support/broker.ts";

const SCRIPT = join(ROOT, "scripts/etcd.mjs");
const scratch = mkdtempSync(join(tmpdir(), "join-broker-etcd-script-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((ok) => {
    const child = spawn(process.execPath, [SCRIPT, ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => (stdout += c));
    child.stderr.on("data", (c) => (stderr += c));
    // "close", not "exit": the last output may still be in the pipes at exit.
    child.once("close", (code) => ok({ code, stdout, stderr }));
  });
}

describe("node scripts/etcd.mjs", () => {
  it("lists every version with its pinned release, without building when asked not to", async () => {
    const r = await run(["list", "--no-build"], { JOIN_BROKER_ETCD_CACHE: join(scratch, "empty") });
    expect(r.code).toBe(0);
    const rows = r.stdout
      .trim()
      .split("\n")
      .map((l) => l.split("\t"));
    expect(rows.map((row) => row[0])).toEqual(["3.4", "3.5", "3.6", "3.7"]);
    for (const row of rows) {
      expect(row[1]).toBe(etcdPin(row[0]!).release);
      // Nothing is built in an empty cache; Debian's 3.4 is where it always is.
      expect(row[2]).toBe(row[0] === "3.4" ? "/usr/bin/etcd" : "not built");
    }
    expect(existsSync(join(scratch, "empty"))).toBe(false);
  });

  it("exits 1 with the reason for an unknown version or command, and prints usage for --help", async () => {
    const unknown = await run(["path", "3.9"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toBe("");
    expect(unknown.stderr).toContain(`unknown etcd version '3.9': choose one of ${ETCD_MINORS.map((m) => `${m} (${etcdPin(m).release})`).join(", ")}`);
    const bad = await run(["fetch"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("unknown command 'fetch'");
    const help = await run(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("path VERSION");
  });

  it("answers 3.4 with Debian's etcd 3.4", async () => {
    const r = await run(["path", "3.4"]);
    expect(r.code).toBe(0);
    expect(binaryRelease(r.stdout.trim())).toMatch(/^3\.4\./);
  });

  // Waits for a build of etcd 3.6 from its Go modules (Go's caches warm: compiling and linking).
  it("builds a release once when two processes ask at once, over a lock left by a dead process", async () => {
    const cache = join(scratch, "cache");
    mkdirSync(cache, { recursive: true });
    const release = etcdPin("3.6").release;
    // A pid that is not running (pid_max is below 2^22 on Linux).
    writeFileSync(join(cache, `${release}.lock`), "4194304");
    const env = { JOIN_BROKER_ETCD_CACHE: cache };
    const [a, b] = await Promise.all([run(["path", "3.6"], env), run(["path", "3.6"], env)]);
    expect([a.code, b.code], `${a.stderr}\n${b.stderr}`).toEqual([0, 0]);
    const path = join(cache, release, "etcd");
    expect(a.stdout.trim()).toBe(path);
    expect(b.stdout.trim()).toBe(path);
    expect(binaryRelease(path)).toBe(release);
    expect(execFileSync(join(cache, release, "etcdctl"), ["version"], { encoding: "utf8" })).toContain(`etcdctl version: ${release}`);
    const both = a.stderr + b.stderr;
    expect(both.match(/\[etcd\] building etcd/g)).toHaveLength(1);
    expect(both.match(/\[etcd\] built etcd/g)).toHaveLength(1);
    expect(both).toMatch(/is building etcd 3\.6\.\d+; waiting for it/);
    // No scratch directory or lock left behind.
    expect(readdirSync(cache).sort()).toEqual([release]);
  });
});
