/**
 * Starts the broker as a real `wrangler dev` process on a free loopback port, with its Durable
 * Object state persisted in a directory of its own, so a test can kill and restart it. With
 * `runtime: "serve"` (or JOIN_BROKER_E2E_RUNTIME=serve) it is `join-broker serve` instead: the
 * same Worker on the workerd npm binary, its state in a data directory. `worker: "bench"` runs
 * the benchmarks' Worker (bench/worker: the broker plus calls production does not need) the same
 * two ways. test/support/stack.ts gathers this with the rest of the stack.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join, resolve } from "node:path";
import { Writable } from "node:stream";
import type { Supervisor } from "../../src/node/serve/supervisor.ts";
import type { Lab } from "../lab/lab.ts";
import { freePorts } from "../../scripts/ports.mjs";
import { commandLine, descendants } from "./processes.ts";
import { spawnUntilReady } from "./ready-process.ts";

export const ROOT = resolve(import.meta.dirname, "../..");
export const ADMIN_TOKEN = "e2e-admin-token-0123456789abcdef";

/** Which program runs the broker: `wrangler dev` (the default) or `join-broker serve`. */
export type BrokerRuntime = "wrangler" | "serve";

export function defaultRuntime(): BrokerRuntime {
  const value = process.env.JOIN_BROKER_E2E_RUNTIME ?? "wrangler";
  if (value !== "wrangler" && value !== "serve") throw new Error(`JOIN_BROKER_E2E_RUNTIME must be wrangler or serve, not ${value}`);
  return value;
}

export interface BrokerProcess {
  url: string;
  /** Where this test process reaches it: `url`, or a forward to it when it runs on a lab host. */
  localUrl: string;
  runtime: BrokerRuntime;
  adminToken: string;
  persistDir: string;
  /** Stops the process (SIGKILL when `hard`), keeping its persisted state. */
  stop(hard?: boolean): Promise<void>;
  /** Starts it again on the same port with the same state. */
  restart(): Promise<void>;
  output(): string;
  /** `serve` only: SIGKILL the workerd process alone (serve restarts it) or serve alone (workerd is orphaned). */
  kill(target: "workerd" | "serve"): Promise<void>;
  /**
   * The workerd process that runs the Worker and its Durable Objects (for its memory). wrangler dev
   * runs two: a proxy in front (it owns the "Ready on" port) and the runtime behind it, the one
   * started with an inspector address.
   */
  workerdPid(): number | null;
  /** The process the broker was started as (wrangler, or serve's supervisor; this process for the in-process bench serve). */
  pid(): number | null;
}

/** Which Worker runs: the broker, or the benchmarks' (bench/worker/entry.ts: the broker plus no-op, clock and stats calls). */
export type BrokerWorker = "broker" | "bench";

export interface StartBrokerOptions {
  persistDir?: string;
  port?: number;
  runtime?: BrokerRuntime;
  /** `serve` only: HTTPS with this certificate and key. */
  tls?: { cert: string; key: string };
  /** `serve` only: more environment for the serve process. */
  env?: Record<string, string>;
  /** `serve` only: more flags. */
  args?: string[];
  /** `serve` only: run on this lab host (test/lab/lab.ts), listening on the host's own address. */
  labHost?: { lab: Lab; host: string };
  /**
   * Default "broker". "bench": under wrangler, bench/wrangler.bench.toml; under serve, the bench
   * Worker wrapped as serve wraps the broker, started by serve's own start-up code in this process
   * (the CLI bundles the broker only); no kill(target) then.
   */
  worker?: BrokerWorker;
}

export async function startBroker(options: StartBrokerOptions = {}): Promise<BrokerProcess> {
  const runtime = options.runtime ?? defaultRuntime();
  const ownsDir = options.persistDir === undefined;
  const persistDir = options.persistDir ?? mkdtempSync(join(tmpdir(), "join-broker-state-"));
  // stop() keeps the state for a restart; a directory made here goes when the test process ends.
  if (ownsDir) process.once("exit", () => rmSync(persistDir, { recursive: true, force: true }));
  // On a lab host a fixed port: the issuer is known before it starts. Elsewhere one picked below
  // the kernel's ephemeral range, not port 0: a restart binds the same port again, and one the
  // kernel chose could meanwhile be handed to another listen(0).
  let port = options.port ?? (options.labHost ? 8787 : (await freePorts(1))[0]!);
  let child: ChildProcess | null = null;
  let supervisor: Supervisor | null = null;
  const worker = options.worker ?? "broker";
  let log = "";
  let lastGroup = 0;
  /** Process groups of earlier serve runs: a serve killed alone leaves its workerd in its group. */
  const groups = new Set<number>();
  const reapGroups = () => {
    for (const group of groups) {
      try {
        process.kill(-group, "SIGKILL");
      } catch {
        /* gone */
      }
    }
    groups.clear();
  };

  const launch = () => (runtime === "wrangler" ? launchWrangler() : worker === "bench" ? launchServeInProcess() : launchServe());

  /** Its own output decides when it is ready: each start waits for its own line, not an earlier run's. */
  const append = (chunk: string) => {
    log += chunk;
    if (log.length > 200_000) log = log.slice(-100_000);
  };

  const launchServe = async () => {
    const lab = options.labHost;
    const host = lab ? lab.lab.host(lab.host).ip : "127.0.0.1";
    const args = [join(ROOT, "bin/join-broker"), "serve", "--listen", `${host}:${port}`, "--data-dir", persistDir, "--log-level", "debug"];
    if (options.tls) args.push("--tls-cert", options.tls.cert, "--tls-key", options.tls.key);
    // On a lab host the bridge is the only network: nothing but the lab's own hosts reach it.
    else if (lab) args.push("--insecure-http");
    // The test process calls it through a forward (another origin): the issuer is the lab address.
    if (lab) args.push("--issuer", `http://${host}:${port}`);
    args.push(...(options.args ?? []));
    const started = await spawnUntilReady(process.execPath, args, {
      what: "join-broker serve",
      ready: /listening on (https?:\/\/(?:127\.0\.0\.1|10\.77\.\d+\.\d+):(\d+))/,
      spawner: lab ? (command, args, spawnOptions) => lab.lab.spawn(lab.host, command, args, spawnOptions) : undefined,
      cwd: ROOT,
      env: { ...process.env, JOIN_BROKER_ADMIN_TOKEN: ADMIN_TOKEN, ...options.env },
      detached: true,
      onOutput: append,
      onSpawn: (proc) => {
        child = proc;
        lastGroup = proc.pid ?? 0;
        if (lastGroup) groups.add(lastGroup);
      },
    });
    port = Number(started.match[2]);
    return started.match[1]!;
  };

  /** The bench Worker the way `join-broker serve` runs the broker: its own start-up code, another entry. */
  const launchServeInProcess = async () => {
    const { startSelfHosted } = await import("../../src/node/serve/start.ts");
    const sink = () =>
      new Writable({
        write(chunk, _encoding, done) {
          append(chunk.toString());
          done();
        },
      });
    const version = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
    supervisor = await startSelfHosted(
      { host: "127.0.0.1", port, dataDir: persistDir, adminToken: ADMIN_TOKEN },
      {
        softwareVersion: version,
        entry: join(ROOT, "bench/worker/serve-entry.ts"),
        log: (line) => append(`${line}\n`),
        output: { stdout: sink(), stderr: sink() },
      },
    );
    return supervisor.url;
  };

  const launchWrangler = async () => {
    const args = [
      "dev",
      ...(worker === "bench" ? ["--config", join(ROOT, "bench/wrangler.bench.toml")] : []),
      "--ip",
      "127.0.0.1",
      "--port",
      String(port),
      "--inspector-port",
      "0",
      "--persist-to",
      persistDir,
      "--var",
      `ADMIN_TOKEN:${ADMIN_TOKEN}`,
      "--show-interactive-dev-session=false",
      "--log-level",
      "info",
    ];
    const started = await spawnUntilReady(join(ROOT, "node_modules/.bin/wrangler"), args, {
      what: "wrangler dev",
      ready: /Ready on (http:\/\/127\.0\.0\.1:(\d+))/,
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
      detached: true,
      onOutput: append,
      onSpawn: (proc) => (child = proc),
    });
    port = Number(started.match[2]);
    return started.match[1]!;
  };

  const waitHealthy = async (url: string) => {
    if (options.tls) return; // serve answered /healthz over TLS before it printed its URL
    // A cold machine may take a while to answer the first request after the "ready" line.
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      try {
        if ((await fetch(`${url}/healthz`)).ok) return;
      } catch {
        /* not listening yet */
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`broker at ${url} never became healthy:\n${log}`);
  };

  const stop = async (hard = false, reapOrphans = true) => {
    if (supervisor) {
      await (supervisor as Supervisor).stop();
      supervisor = null;
      return;
    }
    const proc = child as ChildProcess | null;
    if (!proc || proc.exitCode !== null) {
      // A serve killed alone leaves its workerd behind, in serve's process group (a restart
      // leaves it to the next serve, which must replace it).
      if (reapOrphans) reapGroups();
      return;
    }
    const exited = new Promise((r) => proc.once("exit", r));
    try {
      process.kill(-proc.pid!, hard ? "SIGKILL" : "SIGTERM");
    } catch {
      /* already gone */
    }
    await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
    child = null;
    if (reapOrphans) reapGroups();
  };

  const kill = async (target: "workerd" | "serve") => {
    if (runtime !== "serve" || worker !== "broker") throw new Error("kill(target) needs join-broker serve");
    const proc = child as ChildProcess | null;
    if (!proc) throw new Error("the broker is not running");
    if (target === "serve") {
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGKILL");
      await exited;
      child = null;
      return;
    }
    const pid = Number(readFileSync(join(persistDir, "run", "workerd.pid"), "utf8"));
    const before = log.length;
    process.kill(pid, "SIGKILL");
    // serve restarts it; wait until it says so.
    for (let i = 0; i < 600 && !/workerd restarted/.test(log.slice(before)); i++) await new Promise((r) => setTimeout(r, 100));
    if (!/workerd restarted/.test(log.slice(before))) throw new Error(`serve did not restart workerd:\n${log}`);
  };

  const workerdPid = (): number | null => {
    if (supervisor) return (supervisor as Supervisor).pid ?? null;
    if (runtime === "serve") {
      const file = join(persistDir, "run", "workerd.pid");
      return existsSync(file) ? Number(readFileSync(file, "utf8")) || null : null;
    }
    const proc = child as ChildProcess | null;
    if (!proc?.pid) return null;
    const candidates = descendants(proc.pid, "workerd");
    return candidates.find((pid) => commandLine(pid).includes("--inspector-addr")) ?? candidates[0] ?? null;
  };

  if (options.labHost && runtime !== "serve") throw new Error("a broker on a lab host runs under join-broker serve");
  if (options.labHost && worker !== "broker") throw new Error("a broker on a lab host runs the broker's Worker");
  const url = await launch();
  const localUrl = options.labHost ? await options.labHost.lab.reach(url) : url;
  await waitHealthy(localUrl);
  return {
    url,
    localUrl,
    runtime,
    kill,
    workerdPid,
    pid: () => (supervisor ? process.pid : ((child as ChildProcess | null)?.pid ?? null)),
    adminToken: ADMIN_TOKEN,
    persistDir,
    stop,
    restart: async () => {
      // After a kill("serve"), its orphaned workerd still runs: the next serve replaces it.
      await stop(false, false);
      const again = await launch();
      await waitHealthy(options.labHost ? await options.labHost.lab.reach(again) : again);
    },
    output: () => log,
  };
}
