/**
 * `npm run dev` as a developer runs it: `-- --port N` serves on that port, and a cluster created
 * while serving one port issues tokens for the port served now (the issuer follows the address).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePorts } from "../../scripts/ports.mjs";
import { ROOT, brokerClient } from "../support/stack.ts";

const running = new Set<ChildProcess>();
afterAll(() => Promise.all([...running].map(stop)));

function stop(child: ChildProcess): Promise<void> {
  running.delete(child);
  if (child.exitCode !== null) return Promise.resolve();
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  try {
    process.kill(-child.pid!, "SIGTERM");
  } catch {
    /* gone */
  }
  return Promise.race([exited, new Promise<void>((r) => setTimeout(r, 10_000))]);
}

/** `npm run dev -- …args`, resolved once wrangler says it is ready; returns the output so far. */
function dev(args: string[]): Promise<{ child: ChildProcess; output: () => string; url: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("npm", ["run", "dev", "--", ...args], {
      cwd: ROOT,
      env: { ...process.env, CI: "true", NO_COLOR: "1", FORCE_COLOR: "0" },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    running.add(child);
    let log = "";
    const timer = setTimeout(() => reject(new Error(`npm run dev did not start within 90 s:\n${log}`)), 90_000);
    const onData = (d: Buffer) => {
      log += d.toString();
      const m = /Ready on (http:\/\/127\.0\.0\.1:\d+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve({ child, output: () => log, url: m[1] });
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`npm run dev exited ${code}:\n${log}`));
    });
  });
}

describe("npm run dev", () => {
  // Waits for two starts of `npm run dev` (npm, the console bundle, wrangler's bundle and workerd).
  it("serves on -- --port N, and the issuer follows the port served", async () => {
    const [first, second] = await freePorts(2);
    const state = mkdtempSync(join(tmpdir(), "join-broker-dev-"));
    const a = await dev(["--port", String(first), "--persist-to", state]);
    expect(a.url).toBe(`http://127.0.0.1:${first}`);
    expect(a.output()).toContain(`Broker: http://127.0.0.1:${first}`);
    // The generated binding types match what `npm run dev` serves: wrangler has nothing to warn about.
    expect(a.output()).not.toContain("might be out of date");
    const adminToken = /^ADMIN_TOKEN=(.*)$/m.exec(readFileSync(join(ROOT, ".dev.vars"), "utf8"))![1].trim();
    const onFirst = brokerClient({ url: a.url, adminToken }).admin("dev-port");
    await onFirst.createEnrollmentToken();
    expect((await onFirst.status()).body.issuer).toBe(a.url);
    await stop(a.child);

    const b = await dev([`--port=${second}`, "--persist-to", state]);
    expect(b.url).toBe(`http://127.0.0.1:${second}`);
    const status = await brokerClient({ url: b.url, adminToken }).admin("dev-port").status();
    expect(status.body.issuer).toBe(b.url);
    await stop(b.child);
  });

  it("refuses a --port without a number, with usage, exit 2", () => {
    for (const args of [["--port"], ["--port", "eighty"], ["--port=0"]]) {
      const r = spawnSync("npm", ["run", "--silent", "dev", "--", ...args], { cwd: ROOT, encoding: "utf8", timeout: 30_000 });
      expect({ args, status: r.status }).toEqual({ args, status: 2 });
      expect(r.stderr).toMatch(/npm run dev: --port .*\n\nUsage: npm run dev/);
    }
  });
});
