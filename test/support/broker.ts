/**
 * Starts the broker as a real `wrangler dev` process on a free loopback port, with its Durable
 * Object state persisted in a directory of its own, so a test can kill and restart it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const ROOT = resolve(import.meta.dirname, "../..");
export const ADMIN_TOKEN = "e2e-admin-token-0123456789abcdef";

export interface BrokerProcess {
  url: string;
  adminToken: string;
  persistDir: string;
  /** Stops the process (SIGKILL when `hard`), keeping its persisted state. */
  stop(hard?: boolean): Promise<void>;
  /** Starts it again on the same port with the same state. */
  restart(): Promise<void>;
  output(): string;
}

export async function startBroker(options: { persistDir?: string; port?: number } = {}): Promise<BrokerProcess> {
  const ownsDir = options.persistDir === undefined;
  const persistDir = options.persistDir ?? mkdtempSync(join(tmpdir(), "join-broker-state-"));
  // stop() keeps the state for a restart; a directory made here goes when the test process ends.
  if (ownsDir) process.once("exit", () => rmSync(persistDir, { recursive: true, force: true }));
  let port = options.port ?? 0;
  let child: ChildProcess | null = null;
  let log = "";

  const launch = () =>
    new Promise<string>((ok, fail) => {
      const args = [
        "dev", "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", "0",
        "--persist-to", persistDir, "--var", `ADMIN_TOKEN:${ADMIN_TOKEN}`,
        "--show-interactive-dev-session=false", "--log-level", "info",
      ];
      const proc = spawn(join(ROOT, "node_modules/.bin/wrangler"), args, {
        cwd: ROOT,
        env: { ...process.env, CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1", FORCE_COLOR: "0" },
        stdio: ["ignore", "pipe", "pipe"],
        detached: true,
      });
      child = proc;
      const timer = setTimeout(() => fail(new Error(`wrangler dev did not start within 60 s:\n${log}`)), 60_000);
      const onData = (chunk: Buffer) => {
        log += chunk.toString();
        if (log.length > 200_000) log = log.slice(-100_000);
        const m = /Ready on (http:\/\/127\.0\.0\.1:(\d+))/.exec(log);
        if (m) {
          clearTimeout(timer);
          port = Number(m[2]);
          ok(m[1]);
        }
      };
      proc.stdout!.on("data", onData);
      proc.stderr!.on("data", onData);
      proc.on("exit", (code) => {
        clearTimeout(timer);
        fail(new Error(`wrangler dev exited with ${code}:\n${log}`));
      });
    });

  const waitHealthy = async (url: string) => {
    for (let i = 0; i < 100; i++) {
      try {
        if ((await fetch(`${url}/healthz`)).ok) return;
      } catch {
        /* not listening yet */
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`broker at ${url} never became healthy:\n${log}`);
  };

  const stop = async (hard = false) => {
    const proc = child as ChildProcess | null;
    if (!proc || proc.exitCode !== null) return;
    const exited = new Promise((r) => proc.once("exit", r));
    try {
      process.kill(-proc.pid!, hard ? "SIGKILL" : "SIGTERM");
    } catch {
      /* already gone */
    }
    await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
    child = null;
  };

  const url = await launch();
  await waitHealthy(url);
  return {
    url,
    adminToken: ADMIN_TOKEN,
    persistDir,
    stop,
    restart: async () => {
      await stop();
      const again = await launch();
      await waitHealthy(again);
    },
    output: () => log,
  };
}

/** Admin API helper for tests. */
export async function adminCall(broker: { url: string; adminToken: string }, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${broker.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${broker.adminToken}`, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}
