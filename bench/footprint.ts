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
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { processMemory, processTree } from "../test/support/processes.ts";
import { spawnUntilReady } from "../test/support/ready-process.ts";
import { BIN, brokerClient, enrollCluster, joinArgv, startBroker, startJoinApiProcess, type BrokerProcess } from "../test/support/stack.ts";
import { ROOT, scratchDir } from "./support/paths.ts";
import { log, median, round } from "./support/stats.ts";

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
function startUntil(args: string[], ready: RegExp): Promise<{ proc: ChildProcess }> {
  return spawnUntilReady(process.execPath, [BIN, ...args], { what: `join-broker ${args[0]}`, ready, cwd: ROOT, detached: true, timeoutMs: READY_TIMEOUT_MS });
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

const settle = () => new Promise((r) => setTimeout(r, 1_000));

async function oneRun(settings: FootprintSettings): Promise<FootprintResult["runs"][number]> {
  const dir = mkdtempSync(join(scratchDir(), "footprint-"));
  const procs: ChildProcess[] = [];
  let serve: BrokerProcess | undefined;
  try {
    // As the tests start it (test/support/stack.ts), logging at serve's own default level.
    serve = await startBroker({ runtime: "serve", persistDir: join(dir, "data"), args: ["--log-level", "info"] });
    const url = serve.url;
    const tokens: string[] = [];
    let serveIdleMiB = 0;
    for (let i = 0; i < settings.clusters; i++) {
      const token = await enrollCluster(serve, `fp-${i}`);
      tokens.push(token);
      if (i === 0) {
        await settle();
        serveIdleMiB = treeRssMiB(serve.pid()!);
      }
      const node = brokerClient(serve, { bearer: token }).cluster(`fp-${i}`);
      await node.requestTicket("boot", "https://10.0.0.1:2380");
      if (i > 0) await node.requestTicket("waiting", "https://10.0.0.2:2380");
    }
    await settle();
    const serveLoadedMiB = treeRssMiB(serve.pid()!);

    // An agent queued behind cluster fp-0's bootstrap node, holding its long polls.
    const agent = await startUntil(
      joinArgv({
        broker: url,
        cluster: "fp-0",
        token: tokens[0]!,
        node: "agent-1",
        peerURL: "https://10.0.0.3:2380",
        joinApi: "http://127.0.0.1:9",
        stateDir: join(dir, "agent"),
      }),
      / queued: /,
    );
    procs.push(agent.proc);
    await settle();
    const agentMiB = treeRssMiB(agent.proc.pid!);

    const joinApi = await startJoinApiProcess({ broker: url, cluster: "fp-0", etcd: ["http://127.0.0.1:9"] });
    procs.push(joinApi.proc);
    await settle();
    const joinApiMiB = treeRssMiB(joinApi.proc.pid!);
    return { serveIdleMiB: round(serveIdleMiB, 1), serveLoadedMiB: round(serveLoadedMiB, 1), agentMiB: round(agentMiB, 1), joinApiMiB: round(joinApiMiB, 1) };
  } finally {
    for (const p of procs.reverse()) await stop(p);
    await serve?.stop();
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
