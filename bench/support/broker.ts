/**
 * Starts the bench Worker (bench/wrangler.bench.toml) under a real `wrangler dev` on a free
 * loopback port with its own persisted state, and finds the workerd process that runs it so
 * its memory can be read.
 * @module
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { delimiter, join, resolve } from "node:path";
import { ROOT, scratchDir } from "./paths.ts";

export const ADMIN_TOKEN = "bench-admin-token-0123456789abcdef";
const CONFIG = resolve(ROOT, "bench/wrangler.bench.toml");

export interface BenchBroker {
  url: string;
  adminToken: string;
  persistDir: string;
  /**
   * The pid of the workerd process that runs the Worker and its Durable Objects. wrangler dev
   * runs two: a proxy in front (it owns the "Ready on" port) and the runtime behind it, which
   * is the one started with an inspector address.
   */
  workerdPid(): number | null;
  stop(): Promise<void>;
  output(): string;
}

export async function startBenchBroker(label: string): Promise<BenchBroker> {
  const persistDir = mkdtempSync(join(scratchDir(), `state-${label}-`));
  let log = "";
  const proc: ChildProcess = spawn(
    join(ROOT, "node_modules/.bin/wrangler"),
    [
      "dev",
      "--config",
      CONFIG,
      "--ip",
      "127.0.0.1",
      "--port",
      "0",
      "--inspector-port",
      "0",
      "--persist-to",
      persistDir,
      "--var",
      `ADMIN_TOKEN:${ADMIN_TOKEN}`,
      "--show-interactive-dev-session=false",
      "--log-level",
      "info",
    ],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        // wrangler needs a newer Node than the system's may be: the project's own comes first, as under npm.
        PATH: `${join(ROOT, "node_modules/.bin")}${delimiter}${process.env.PATH ?? ""}`,
        CLOUDFLARE_CF_FETCH_ENABLED: "false",
        WRANGLER_SEND_METRICS: "false",
        CI: "true",
        NO_COLOR: "1",
        FORCE_COLOR: "0",
      },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    },
  );
  const waitHealthy = async (url: string) => {
    for (let i = 0; i < 300; i++) {
      try {
        if ((await fetch(`${url}/healthz`)).ok) return;
      } catch {
        /* not listening yet */
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`bench broker at ${url} never became healthy:\n${log}`);
  };

  const stop = async () => {
    await stopProcess();
    rmSync(persistDir, { recursive: true, force: true });
  };
  const stopProcess = async () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once("exit", r));
    try {
      process.kill(-proc.pid!, "SIGTERM");
    } catch {
      /* already gone */
    }
    const done = await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(() => r(false), 10_000))]);
    if (!done) {
      try {
        process.kill(-proc.pid!, "SIGKILL");
      } catch {
        /* already gone */
      }
    }
  };

  const ready = new Promise<string>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`wrangler dev did not start within 90 s:\n${log}`)), 90_000);
    const onData = (chunk: Buffer) => {
      // Keep only the tail: every committed state change is a log line, and there are many.
      log = (log + chunk.toString()).slice(-50_000);
      const m = /Ready on (http:\/\/127\.0\.0\.1:\d+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        ok(m[1]);
      }
    };
    proc.stdout!.on("data", onData);
    proc.stderr!.on("data", onData);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      fail(new Error(`wrangler dev exited with ${code}:\n${log}`));
    });
  });
  let url: string;
  try {
    url = await ready;
    await waitHealthy(url);
  } catch (e) {
    await stop();
    throw e;
  }
  return { url, adminToken: ADMIN_TOKEN, persistDir, workerdPid: () => runtimeWorkerd(proc.pid!), stop, output: () => log };
}

function runtimeWorkerd(root: number): number | null {
  const candidates = descendants(root, "workerd");
  const cmdline = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8");
    } catch {
      return "";
    }
  };
  return candidates.find((pid) => cmdline(pid).includes("--inspector-addr")) ?? candidates[0] ?? null;
}

/** Every process below `root` (children, grandchildren, …), nearest first. */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // The command name is in parentheses and may contain spaces: the ppid follows the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(entry));
      children.set(ppid, list);
    } catch {
      /* exited meanwhile */
    }
  }
  const found: number[] = [];
  const queue = [...(children.get(root) ?? [])];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    found.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return found;
}

/** The processes below `root` whose command name is `name`. */
function descendants(root: number, name: string): number[] {
  return processTree(root).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === name;
    } catch {
      return false;
    }
  });
}

/** VmRSS and VmHWM (peak RSS) of a process, in bytes. */
export function processMemory(pid: number): { rssBytes: number; peakRssBytes: number } | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) * 1024;
    return { rssBytes: kb("VmRSS"), peakRssBytes: kb("VmHWM") };
  } catch {
    return null;
  }
}

/** The SQLite files of the Durable Objects of class `JoinQueue` under the persist directory, with their sizes. */
export function durableObjectFiles(persistDir: string): { path: string; bytes: number }[] {
  const out: { path: string; bytes: number }[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (/\.sqlite(-wal|-shm)?$/.test(entry.name) && path.includes("JoinQueue"))
        out.push({ path: path.slice(persistDir.length + 1), bytes: statSync(path).size });
    }
  };
  walk(persistDir);
  return out;
}
