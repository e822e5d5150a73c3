/**
 * (6) The single executable file (`npm run package`) beside the npm form: sizes, and an agent's
 * start-up. Seven agents (`join-broker join`) are started at the same moment, each against a
 * loopback HTTP server of its own standing in for the broker; an agent's start-up is the time from
 * its spawn to its first request arriving there, on this process's clock. Each run starts seven
 * single-file agents and seven npm-form agents (this Node running bin/join-broker, the fresh
 * built CLI: the same Node version as inside the file), one group after the other, the order
 * alternating from run to run. The stand-in answers 503 with Retry-After, and every agent is
 * killed once its request has arrived.
 * @module
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { buildRelease, nodeBinary } from "../scripts/package.mjs";
import { BIN, joinArgv } from "../test/support/stack.ts";
import { ROOT, scratchDir } from "./support/paths.ts";
import { log, median, round } from "./support/stats.ts";

const AGENTS = 7;
const TIMEOUT_MS = 60_000;

export interface ExecutableSettings {
  runs: number;
}

export interface ExecutableResult {
  version: string;
  nodeVersion: string;
  agents: number;
  sizes: {
    x64Bytes: number;
    arm64Bytes: number;
    /** The official Node binary the x64 file is made from. */
    nodeX64Bytes: number;
    /** The npm form on a node: the package with its production dependencies (`npm ls --omit=dev`), without Node. */
    npmTreeBytes: number;
    /** The Node binary the npm form runs on (this one). */
    npmNodeBytes: number;
  };
  runs: { run: number; order: string; executableMs: number[]; npmMs: number[]; executableMedianMs: number; npmMedianMs: number }[];
  summary: { executableMs: number; npmMs: number; ratio: number };
}

type Form = "executable" | "npm";

/** Seven stand-in brokers: each resolves the arrival time of its first request. */
async function standIns(): Promise<{ urls: string[]; first: Promise<number>[]; close(): Promise<void> }> {
  const servers: Server[] = [];
  const first: Promise<number>[] = [];
  for (let i = 0; i < AGENTS; i++) {
    let arrived: (at: number) => void = () => undefined;
    first.push(new Promise((r) => (arrived = r)));
    const server = createServer((req, res) => {
      arrived(performance.now());
      req.resume();
      res.writeHead(503, { "content-type": "application/problem+json", "retry-after": "30" });
      res.end(JSON.stringify({ type: "about:blank", title: "bench stand-in", status: 503 }));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    servers.push(server);
  }
  return {
    urls: servers.map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`),
    first,
    close: () => Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r())).then(() => s.closeAllConnections()))).then(() => undefined),
  };
}

async function startGroup(form: Form, file: string, dir: string): Promise<number[]> {
  mkdirSync(dir, { recursive: true });
  const stand = await standIns();
  const procs: ChildProcess[] = [];
  try {
    const spawnedAt: number[] = [];
    for (let i = 0; i < AGENTS; i++) {
      const args = joinArgv({
        broker: stand.urls[i]!,
        cluster: "bench-startup",
        token: "bench-enrollment-token-0123456789",
        node: `startup-${i}`,
        peerURL: `http://127.0.0.1:${20_000 + i}`,
        joinApi: "http://127.0.0.1:9",
        stateDir: join(dir, `${form}-${i}`),
        etcdBin: "/bin/true",
        logFormat: "json",
      });
      const [command, argv] = form === "executable" ? [file, args] : [process.execPath, [BIN, ...args]];
      spawnedAt.push(performance.now());
      procs.push(spawn(command, argv, { cwd: dir, stdio: ["ignore", "ignore", "ignore"], detached: true }));
    }
    const spawnFailed = new Promise<never>((_, fail) => {
      for (const p of procs) p.once("error", fail);
    });
    const timeout = new Promise<never>((_, fail) =>
      setTimeout(() => fail(new Error(`${form}: not every agent reached the stand-in within ${TIMEOUT_MS / 1000} s`)), TIMEOUT_MS).unref(),
    );
    const arrivals = await Promise.race([Promise.all(stand.first), timeout, spawnFailed]);
    return arrivals.map((at, i) => round(at - spawnedAt[i]!, 1));
  } finally {
    for (const p of procs) {
      try {
        process.kill(-p.pid!, "SIGKILL");
      } catch {
        /* gone */
      }
    }
    await stand.close();
  }
}

/** Bytes on disk of the package's production tree (`npm ls --omit=dev --all --parseable`, each directory once). */
function npmTreeBytes(): number {
  const paths = execFileSync("npm", ["ls", "--omit=dev", "--all", "--parseable"], { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
    .split("\n")
    .filter(Boolean)
    .map((p) => (p === ROOT ? join(ROOT, "dist/cli") : p))
    .sort();
  const outermost = paths.filter((p, i) => !paths.slice(0, i).some((q) => p.startsWith(`${q}/`)));
  // The package itself: what npm installs of it (bin, dist/cli, src, README.md), not the checkout.
  const own = ["bin", "src", "README.md", "package.json"].map((f) => join(ROOT, f));
  const out = execFileSync("du", ["-scb", ...outermost, ...own], { encoding: "utf8" });
  return Number(/^(\d+)\s+total$/m.exec(out)![1]);
}

export async function executableStartup(settings: ExecutableSettings): Promise<ExecutableResult> {
  const built = await buildRelease();
  const [x64, arm64] = built.files as [string, string];
  log(`executable: ${x64} (Node ${built.nodeVersion})`);
  if (process.version !== `v${built.nodeVersion}`) log(`executable: the npm form runs on Node ${process.version}, the file on ${built.nodeVersion}`);
  const sizes = {
    x64Bytes: statSync(x64).size,
    arm64Bytes: statSync(arm64).size,
    nodeX64Bytes: statSync(await nodeBinary(built.nodeVersion, "x64")).size,
    npmTreeBytes: npmTreeBytes(),
    npmNodeBytes: statSync(process.execPath).size,
  };
  const dir = mkdtempSync(join(scratchDir(), "executable-"));
  const runs: ExecutableResult["runs"] = [];
  try {
    for (let run = 0; run < settings.runs; run++) {
      const order: Form[] = run % 2 === 0 ? ["executable", "npm"] : ["npm", "executable"];
      const times: Record<Form, number[]> = { executable: [], npm: [] };
      for (const form of order) times[form] = await startGroup(form, x64, join(dir, `run-${run}`));
      runs.push({
        run,
        order: order.join(" → "),
        executableMs: times.executable,
        npmMs: times.npm,
        executableMedianMs: median(times.executable),
        npmMedianMs: median(times.npm),
      });
      log(`executable run ${run + 1}: file ${median(times.executable)} ms, npm form ${median(times.npm)} ms (medians of ${AGENTS})`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const executableMs = median(runs.map((r) => r.executableMedianMs));
  const npmMs = median(runs.map((r) => r.npmMedianMs));
  return {
    version: built.version,
    nodeVersion: built.nodeVersion,
    agents: AGENTS,
    sizes,
    runs,
    summary: { executableMs, npmMs, ratio: round(executableMs / npmMs, 3) },
  };
}
