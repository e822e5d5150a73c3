/**
 * Runs workerd for `join-broker serve` and keeps it running: waits until it answers, restarts
 * it with backoff when it dies, and forwards SIGTERM/SIGINT.
 * @module
 */
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { createRequire } from "node:module";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { ADMIN_TOKEN_ENV } from "./config.ts";
import { processMatches, readPid } from "./data-dir.ts";

/** The workerd binary of the `workerd` npm package (a dependency), unless JOIN_BROKER_WORKERD names another. */
export function workerdBinary(env: NodeJS.ProcessEnv = process.env): string {
  if (env.JOIN_BROKER_WORKERD) return env.JOIN_BROKER_WORKERD;
  const mod = createRequire(import.meta.url)("workerd") as { default: string };
  return mod.default;
}

export class StartError extends Error {
  override readonly name = "StartError";
  readonly code = "ERR_SERVE_START";
}

export interface SupervisorOptions {
  workerd: string;
  config: string;
  runDir: string;
  adminToken: string;
  /** Host to probe for readiness (a loopback address for a wildcard listen). */
  probeHost: string;
  tls: boolean;
  log: (line: string) => void;
  /** workerd's own output (its log lines, the Worker's console). */
  output: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream };
  startTimeoutMs?: number;
  /** Consecutive failed restarts after which serve gives up (exit non-zero; systemd restarts it). */
  maxFailedRestarts?: number;
}

const BACKOFF_MS = [500, 1000, 2000, 5000, 10_000, 30_000];
/** A run this long resets the backoff. */
const STABLE_MS = 60_000;

/**
 * Kills a workerd left behind by a `serve` that was killed with SIGKILL (it would still hold the
 * port and the SQLite files). Runs under the data directory's lock (`lockDataDir`); the pid file
 * check also refuses a live `serve` of a version that took no lock.
 */
export async function claimRunDir(runDir: string, configPath: string): Promise<void> {
  const servePid = readPid(join(runDir, "serve.pid"));
  // "join-broker serve" is in serve's command line, not in its workerd's (whose config path may contain "join-broker").
  if (servePid && servePid !== process.pid && processMatches(servePid, "join-broker serve")) {
    throw new StartError(`another join-broker serve (pid ${servePid}) is using this data directory`);
  }
  const orphan = readPid(join(runDir, "workerd.pid"));
  if (orphan && processMatches(orphan, configPath)) {
    process.kill(orphan, "SIGKILL");
    for (let i = 0; i < 100 && processMatches(orphan, configPath); i++) await sleep(50);
  }
}

export class Supervisor {
  #child: ChildProcess | null = null;
  #port = 0;
  #stopping = false;
  #stopped: Promise<number>;
  #resolveStopped!: (code: number) => void;

  constructor(
    readonly options: SupervisorOptions,
    /** The address from --listen; its port may be 0 until the first start reports the real one. */
    readonly address: { host: string; port: number },
  ) {
    this.#port = address.port;
    this.#stopped = new Promise((r) => (this.#resolveStopped = r));
  }

  get url(): string {
    const host = this.address.host.includes(":") ? `[${this.address.host}]` : this.address.host;
    return `${this.options.tls ? "https" : "http"}://${host}:${this.#port}`;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Starts workerd and resolves once it answers; throws StartError when it does not. */
  async start(): Promise<void> {
    await this.#launch();
    this.#watch();
  }

  /** Resolves with serve's exit code once workerd is gone for good. */
  done(): Promise<number> {
    return this.#stopped;
  }

  /** Forwards `signal` to workerd and resolves when it has exited (SIGKILL after 10 s). */
  async stop(signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
    this.#stopping = true;
    const child = this.#child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<string>((r) => child.once("exit", (code, sig) => r(sig ?? `exit ${code}`)));
      child.kill(signal);
      let forced = false;
      const timer = setTimeout(() => {
        forced = true;
        child.kill("SIGKILL");
      }, 10_000);
      const how = await exited;
      clearTimeout(timer);
      this.options.log(forced ? `workerd did not stop within 10 s of ${signal}: killed` : `workerd stopped on ${signal} (${how})`);
    }
    this.#resolveStopped(0);
  }

  #launch(): Promise<void> {
    const { options } = this;
    const address = `${this.address.host.includes(":") ? `[${this.address.host}]` : this.address.host}:${this.#port}`;
    const child = spawn(options.workerd, ["serve", options.config, "--socket-addr", `http=${address}`, "--control-fd", "3"], {
      env: { ...process.env, [ADMIN_TOKEN_ENV]: options.adminToken },
      stdio: ["ignore", "pipe", "pipe", "pipe"],
    });
    this.#child = child;
    writeFileSync(join(options.runDir, "workerd.pid"), `${child.pid}\n`);
    child.stdout!.pipe(options.output.stdout, { end: false });
    let early = "";
    child.stderr!.on("data", (chunk: Buffer) => {
      if (early.length < 20_000) early += chunk.toString();
      options.output.stderr.write(chunk);
    });
    return new Promise<void>((ok, fail) => {
      const timeoutMs = options.startTimeoutMs ?? 30_000;
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        fail(new StartError(`workerd did not answer within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
        clearTimeout(timer);
        fail(new StartError(`workerd exited during start (${signal ?? `exit ${code}`})${early.trim() ? `:\n${early.trim()}` : ""}`));
      };
      child.once("exit", onExit);
      const control = createInterface({ input: child.stdio[3] as NodeJS.ReadableStream });
      control.on("line", (line) => {
        let message: { event?: string; socket?: string; port?: number };
        try {
          message = JSON.parse(line);
        } catch {
          return;
        }
        if (message.event !== "listen" || message.socket !== "http" || !message.port) return;
        this.#port = message.port;
        void this.#probe(Date.now() + timeoutMs).then(
          () => {
            clearTimeout(timer);
            child.off("exit", onExit);
            ok();
          },
          (e) => {
            clearTimeout(timer);
            child.off("exit", onExit);
            child.kill("SIGKILL");
            fail(e);
          },
        );
      });
    });
  }

  /** GET /healthz until it answers 200 (the probe skips certificate checks: it is our own socket). */
  async #probe(deadline: number): Promise<void> {
    const { probeHost, tls } = this.options;
    for (;;) {
      const status = await new Promise<number>((ok) => {
        const req = (tls ? httpsRequest : httpRequest)(
          { host: probeHost, port: this.#port, path: "/healthz", method: "GET", rejectUnauthorized: false, timeout: 2000 },
          (res) => {
            res.resume();
            ok(res.statusCode ?? 0);
          },
        );
        req.on("error", () => ok(0));
        req.on("timeout", () => req.destroy());
        req.end();
      });
      if (status === 200) return;
      if (Date.now() > deadline) throw new StartError(`workerd listens on port ${this.#port} but /healthz answered ${status || "nothing"}`);
      await sleep(100);
    }
  }

  /** Restarts workerd whenever it exits without being asked to, with growing pauses. */
  #watch(): void {
    const child = this.#child!;
    const startedAt = Date.now();
    child.once("exit", (code, signal) => {
      if (this.#stopping) return;
      this.options.log(`workerd exited (${signal ?? `exit ${code}`}); restarting`);
      void this.#restart(Date.now() - startedAt >= STABLE_MS ? 0 : 1);
    });
  }

  async #restart(attempt: number): Promise<void> {
    const max = this.options.maxFailedRestarts ?? 10;
    for (let failures = attempt; ; failures++) {
      if (this.#stopping) return;
      const pause = failures === 0 ? 0 : BACKOFF_MS[Math.min(failures - 1, BACKOFF_MS.length - 1)];
      if (pause) await sleep(pause);
      if (this.#stopping) return;
      try {
        await this.#launch();
        this.options.log(`workerd restarted (pid ${this.#child?.pid}); listening on ${this.url}`);
        this.#watch();
        return;
      } catch (e) {
        this.options.log(`restart failed: ${(e as Error).message}`);
        if (failures + 1 >= max) {
          this.options.log(`giving up after ${failures + 1} failed restarts`);
          this.#stopping = true;
          this.#resolveStopped(1);
          return;
        }
      }
    }
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
