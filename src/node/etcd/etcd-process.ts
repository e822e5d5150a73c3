/**
 * etcd's processes, in one place: the exact flags (a pure function, so a node agent can print
 * them for another supervisor), starting one and waiting until it serves (tests, the bench, a
 * quorum rescue), and stopping one, whether this process started it (SIGTERM, then SIGKILL) or
 * an earlier run left it (found by its arguments in /proc). The agent's supervisor
 * (src/node/agent/local-etcd/etcd-supervisor.ts) restarts its etcd through the same helpers.
 * @module
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, mkdirSync, type WriteStream } from "node:fs";
import { finished } from "node:stream";
import { setTimeout as delay } from "node:timers/promises";
import { isAlive, processArgv, processIds } from "../proc.ts";
import { EtcdGateway } from "./gateway.ts";
import { tlsFetch } from "./tls-fetch.ts";
import { grpcReads, type EtcdReads } from "./grpc-reads.ts";

export interface EtcdFlagsInput {
  name: string;
  dataDir: string;
  /** Where clients reach it, e.g. http://127.0.0.1:2379; it listens on the same URL. */
  clientURL: string;
  /** Where peers reach it, e.g. http://127.0.0.1:2380; it listens on the same URL. */
  peerURL: string;
  /** Listen elsewhere than the advertised URL (e.g. http://0.0.0.0:2379 behind NAT); default: clientURL. */
  listenClientURL?: string;
  /** Default: peerURL. */
  listenPeerURL?: string;
  /** `name=peerURL` entries, or the joined `--initial-cluster` string. */
  initialCluster: readonly string[] | string;
  initialClusterState: "new" | "existing";
  /** Only used by `new`; a distinct token keeps two test clusters from ever talking. */
  initialClusterToken?: string;
  /** Raft tick; etcd's default is 100 ms. */
  heartbeatIntervalMs?: number;
  /** etcd's default is 1000 ms; keep it ≥ 5 × the heartbeat. */
  electionTimeoutMs?: number;
  /**
   * TLS on both ports with client-certificate auth on both: the server certificate on the client
   * port, the peer certificate on the peer port (both ends), each trusting only `caFile`.
   */
  tls?: { caFile: string; certFile: string; keyFile: string; peerCertFile: string; peerKeyFile: string; crlFile?: string };
  /** Appended verbatim, after ours. */
  extraArgs?: readonly string[];
}

/** The command line (without the binary) that starts this member. */
export function etcdFlags(input: EtcdFlagsInput): string[] {
  const initialCluster = typeof input.initialCluster === "string" ? input.initialCluster : input.initialCluster.join(",");
  const flags = [
    `--name=${input.name}`,
    `--data-dir=${input.dataDir}`,
    `--listen-client-urls=${input.listenClientURL ?? input.clientURL}`,
    `--advertise-client-urls=${input.clientURL}`,
    `--listen-peer-urls=${input.listenPeerURL ?? input.peerURL}`,
    `--initial-advertise-peer-urls=${input.peerURL}`,
    `--initial-cluster=${initialCluster}`,
    `--initial-cluster-state=${input.initialClusterState}`,
  ];
  if (input.initialClusterToken) flags.push(`--initial-cluster-token=${input.initialClusterToken}`);
  if (input.tls) {
    const t = input.tls;
    flags.push(`--cert-file=${t.certFile}`, `--key-file=${t.keyFile}`, `--trusted-ca-file=${t.caFile}`, "--client-cert-auth");
    flags.push(`--peer-cert-file=${t.peerCertFile}`, `--peer-key-file=${t.peerKeyFile}`, `--peer-trusted-ca-file=${t.caFile}`, "--peer-client-cert-auth");
    // etcd reads the list again for every new TLS connection, on both ports: a certificate
    // revoked there is refused from the next connection on.
    if (t.crlFile) flags.push(`--client-crl-file=${t.crlFile}`, `--peer-crl-file=${t.crlFile}`);
  }
  flags.push(`--heartbeat-interval=${input.heartbeatIntervalMs ?? 100}`, `--election-timeout=${input.electionTimeoutMs ?? 1000}`);
  // zap to stderr: one JSON object a line, and no capnslog deprecation banner on 3.4.
  flags.push("--logger=zap", "--log-outputs=stderr");
  flags.push(...(input.extraArgs ?? []));
  return flags;
}

/** A shell-quoted command line, for printing. */
export function etcdCommandLine(bin: string, input: EtcdFlagsInput): string {
  const quote = (s: string) => (/^[A-Za-z0-9_./:=,@%+-]+$/.test(s) ? s : `'${s.replaceAll("'", "'\\''")}'`);
  return [bin, ...etcdFlags(input)].map(quote).join(" ");
}

export interface StartEtcdOptions extends EtcdFlagsInput {
  bin: string;
  /** Also append etcd's output to this file. */
  logFile?: string;
  /**
   * What "up" means before `startEtcd` resolves: `healthy` = GET /health is true (a voter with a
   * leader), `serving` = its client URL answers maintenance/status (also a learner), `none` = return
   * right after spawning. Default `healthy`.
   */
  waitFor?: "healthy" | "serving" | "none";
  /** Default 30 s. */
  startTimeoutMs?: number;
}

export interface EtcdProcess {
  readonly pid: number;
  readonly name: string;
  readonly clientURL: string;
  readonly peerURL: string;
  readonly dataDir: string;
  readonly args: readonly string[];
  /** Resolves with the exit code (or signal name) once the process is gone and all it printed is read and in the log file. */
  readonly exited: Promise<number | string>;
  running(): boolean;
  /** The last lines etcd printed. */
  logTail(lines?: number): string;
  waitUntil(what: "healthy" | "serving", timeoutMs?: number): Promise<void>;
  /** SIGTERM, then SIGKILL after `graceMs` (default 5 s). Safe to call twice. */
  stop(graceMs?: number): Promise<void>;
}

const LOG_KEEP = 64 * 1024;

export class EtcdStartError extends Error {
  override readonly name = "EtcdStartError";
  readonly code = "ERR_ETCD_START";
  constructor(
    message: string,
    readonly logTail: string,
  ) {
    super(`${message}\n--- etcd log (tail) ---\n${logTail}`);
  }
}

export async function startEtcd(options: StartEtcdOptions): Promise<EtcdProcess> {
  mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
  const args = etcdFlags(options);
  let log = "";
  let file: WriteStream | null = null;
  if (options.logFile) {
    file = createWriteStream(options.logFile, { flags: "a" });
    // A log file that cannot be written (a full disk, say) costs the file, not the node: the
    // tail kept here still has the last lines.
    file.once("error", (e) => {
      file = null;
      log += `\n[the etcd log file ${options.logFile} could not be written: ${e.message}]\n`;
    });
  }
  const child: ChildProcess = spawn(options.bin, args, { stdio: ["ignore", "pipe", "pipe"] });
  const spawned = new Promise<void>((ok, fail) => {
    child.once("spawn", () => ok());
    child.once("error", (e) => fail(new EtcdStartError(`cannot run ${options.bin}: ${e.message}`, "")));
  });
  const onData = (chunk: Buffer) => {
    log += chunk.toString();
    if (log.length > LOG_KEEP * 2) log = log.slice(-LOG_KEEP);
    file?.write(chunk);
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  // "close", not "exit": at exit, output may still be in the pipes (and would come after the end).
  const exited = new Promise<number | string>((resolve) =>
    child.once("close", (code, signal) => {
      const result = code ?? signal ?? "unknown";
      if (!file) return resolve(result);
      // Written out, or failed (then the tail says so): either way there is no more to wait for.
      finished(file.end(), () => resolve(result));
    }),
  );
  await spawned;

  // With TLS, it is asked as its own node asks it: over gRPC, with the peer certificate as the
  // client's (with etcd's auth on, the JSON gateway answers no certificate).
  const files = options.tls ? { ca: options.tls.caFile, cert: options.tls.peerCertFile, key: options.tls.peerKeyFile } : null;
  const plain = new EtcdGateway(options.clientURL, { timeoutMs: 2_000, ...(files ? { fetch: tlsFetch(files) } : {}) });
  const gateway: EtcdReads = files ? grpcReads(options.clientURL, files, (e) => plain.health(e), { timeoutMs: 2_000 }) : plain;
  const tail = (lines = 30) => log.split("\n").filter(Boolean).slice(-lines).join("\n");
  const running = () => child.exitCode === null && child.signalCode === null;

  const waitUntil = async (what: "healthy" | "serving", timeoutMs = options.startTimeoutMs ?? 30_000) => {
    const deadline = Date.now() + timeoutMs;
    let last = "";
    while (Date.now() < deadline) {
      if (!running()) throw new EtcdStartError(`etcd ${options.name} exited (${child.exitCode ?? child.signalCode}) before it was ${what}`, tail());
      if (what === "healthy") {
        if (await gateway.health(options.clientURL)) return;
        last = "GET /health is not true yet";
      } else {
        const s = await gateway.status(options.clientURL);
        if (s.ok) return;
        last = s.error.message;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new EtcdStartError(`etcd ${options.name} was not ${what} within ${timeoutMs} ms (${last})`, tail());
  };

  const stop = (graceMs = 5_000) => stopChild(child, exited, graceMs);

  const proc: EtcdProcess = {
    pid: child.pid!,
    name: options.name,
    clientURL: options.clientURL,
    peerURL: options.peerURL,
    dataDir: options.dataDir,
    args,
    exited,
    running,
    logTail: tail,
    waitUntil,
    stop,
  };
  const waitFor = options.waitFor ?? "healthy";
  if (waitFor !== "none") {
    try {
      await waitUntil(waitFor);
    } catch (e) {
      await stop(1_000);
      throw e;
    }
  }
  return proc;
}

/** Whether a child process has neither exited nor been killed. */
function alive(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

/** Stops a child this process started: SIGTERM, then SIGKILL after `graceMs`; resolves once `exited` does. */
export async function stopChild(child: ChildProcess, exited: Promise<unknown>, graceMs: number): Promise<void> {
  if (!alive(child)) {
    await exited;
    return;
  }
  child.kill("SIGTERM");
  const timer = setTimeout(() => {
    if (alive(child)) child.kill("SIGKILL");
  }, graceMs);
  await exited;
  clearTimeout(timer);
}

/** Stops a process this one did not start (an etcd left running): SIGTERM, up to 10 s, then SIGKILL. */
export async function terminate(pid: number): Promise<void> {
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    return;
  }
  for (let i = 0; i < 100 && isAlive(pid); i++) await delay(100);
  if (isAlive(pid)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* gone meanwhile */
    }
    for (let i = 0; i < 50 && isAlive(pid); i++) await delay(100);
  }
}

/** Live processes with this exact argument, e.g. an etcd's `--data-dir=…` (Linux /proc; nothing elsewhere). */
export function processesWithArgument(argument: string): number[] {
  return processIds().filter((pid) => isAlive(pid) && processArgv(pid)?.includes(argument));
}
