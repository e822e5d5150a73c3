/**
 * (7) Footprint: the memory each program takes on the machine that runs it, for sizing. The real
 * processes, started as an operator starts them (`bin/join-broker`, the built CLI): `join-broker
 * serve` (its Node supervisor and workerd together) idle with one cluster, then with `clusters`
 * clusters each holding a bootstrap admission and a queued ticket; an agent waiting in the queue
 * (it holds long polls and nothing else); and the reference join API, idle. Each figure is the
 * resident set (VmRSS) of the process and all its descendants, read from /proc once the process
 * said it was ready and a second has passed; the median of the runs.
 * @module
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { processMemory, processTree } from "./support/broker.ts";
import { ROOT, scratchDir } from "./support/paths.ts";
import { log, median, round } from "./support/stats.ts";

const BIN = join(ROOT, "bin/join-broker");
const ADMIN = "bench-footprint-admin-token-0123456789";
const READY_TIMEOUT_MS = 120_000;

export interface FootprintSettings {
  runs: number;
  clusters: number;
}

export interface FootprintResult {
  clusters: number;
  runs: { serveIdleMiB: number; serveLoadedMiB: number; agentMiB: number; joinApiMiB: number }[];
  summary: { serveIdleMiB: number; serveLoadedMiB: number; agentMiB: number; joinApiMiB: number };
}

/** Resident memory of `pid` and every descendant, in MiB. */
export function treeRssMiB(pid: number): number {
  return [pid, ...processTree(pid)].reduce((sum, p) => sum + (processMemory(p)?.rssBytes ?? 0), 0) / (1024 * 1024);
}

/** Starts `join-broker …args` and resolves once a line of its output matches `ready`. */
function startUntil(args: string[], ready: RegExp, env: Record<string, string> = {}): Promise<{ proc: ChildProcess; match: RegExpMatchArray }> {
  const proc = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"], detached: true });
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(
      () => reject(new Error(`join-broker ${args[0]} was not ready in ${READY_TIMEOUT_MS / 1000} s:\n${out.slice(-2000)}`)),
      READY_TIMEOUT_MS,
    );
    const take = (d: Buffer) => {
      out += d;
      const match = out.match(ready);
      if (match) {
        clearTimeout(timer);
        resolve({ proc, match });
      }
    };
    proc.stdout!.on("data", take);
    proc.stderr!.on("data", take);
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`join-broker ${args[0]} exited ${code}:\n${out.slice(-2000)}`));
    });
  });
}

function stop(proc: ChildProcess | undefined): Promise<void> {
  if (!proc || proc.exitCode !== null || proc.pid === undefined) return Promise.resolve();
  return new Promise((resolve) => {
    proc.removeAllListeners("exit");
    proc.once("exit", () => resolve());
    try {
      process.kill(-proc.pid!, "SIGTERM");
    } catch {
      resolve();
    }
  });
}

async function call(url: string, method: string, path: string, bearer: string, body?: unknown): Promise<any> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
}

const settle = () => new Promise((r) => setTimeout(r, 1_000));

async function oneRun(settings: FootprintSettings): Promise<FootprintResult["runs"][number]> {
  const dir = mkdtempSync(join(scratchDir(), "footprint-"));
  const procs: ChildProcess[] = [];
  try {
    const serve = await startUntil(["serve", "--listen", "127.0.0.1:0", "--data-dir", join(dir, "data")], /listening on (\S+)/, {
      JOIN_BROKER_ADMIN_TOKEN: ADMIN,
    });
    procs.push(serve.proc);
    const url = serve.match[1]!;
    const tokens: string[] = [];
    let serveIdleMiB = 0;
    for (let i = 0; i < settings.clusters; i++) {
      const { token } = await call(url, "POST", `/v1/admin/clusters/fp-${i}/enrollment-tokens`, ADMIN, {});
      tokens.push(token);
      if (i === 0) {
        await settle();
        serveIdleMiB = treeRssMiB(serve.proc.pid!);
      }
      await call(url, "POST", `/v1/clusters/fp-${i}/tickets`, token, { node: "boot", peerURL: "https://10.0.0.1:2380" });
      if (i > 0) await call(url, "POST", `/v1/clusters/fp-${i}/tickets`, token, { node: "waiting", peerURL: "https://10.0.0.2:2380" });
    }
    await settle();
    const serveLoadedMiB = treeRssMiB(serve.proc.pid!);

    // An agent queued behind cluster fp-0's bootstrap node, holding its long polls.
    const agent = await startUntil(
      [
        "join",
        "--broker",
        url,
        "--cluster",
        "fp-0",
        "--token",
        tokens[0]!,
        "--node",
        "agent-1",
        "--peer-url",
        "https://10.0.0.3:2380",
        "--join-api",
        "http://127.0.0.1:9",
        "--state-dir",
        join(dir, "agent"),
      ],
      / queued: /,
    );
    procs.push(agent.proc);
    await settle();
    const agentMiB = treeRssMiB(agent.proc.pid!);

    const joinApi = await startUntil(
      ["controller", "--etcd", "http://127.0.0.1:9", "--broker", url, "--cluster", "fp-0", "--listen", "127.0.0.1:0"],
      /join API listening on/,
    );
    procs.push(joinApi.proc);
    await settle();
    const joinApiMiB = treeRssMiB(joinApi.proc.pid!);
    return { serveIdleMiB: round(serveIdleMiB, 1), serveLoadedMiB: round(serveLoadedMiB, 1), agentMiB: round(agentMiB, 1), joinApiMiB: round(joinApiMiB, 1) };
  } finally {
    for (const p of procs.reverse()) await stop(p);
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function footprint(settings: FootprintSettings): Promise<FootprintResult> {
  const runs: FootprintResult["runs"] = [];
  for (let i = 0; i < settings.runs; i++) {
    log(`footprint: run ${i + 1} of ${settings.runs} (serve with ${settings.clusters} clusters, a queued agent, the join API)`);
    runs.push(await oneRun(settings));
  }
  const m = (k: keyof FootprintResult["summary"]) => round(median(runs.map((r) => r[k])), 1);
  return {
    clusters: settings.clusters,
    runs,
    summary: { serveIdleMiB: m("serveIdleMiB"), serveLoadedMiB: m("serveLoadedMiB"), agentMiB: m("agentMiB"), joinApiMiB: m("joinApiMiB") },
  };
}
