/**
 * The etcd the agent starts with `--etcd-bin`: one process per data dir, restarted when it dies,
 * stopped (SIGTERM, then SIGKILL) when the agent stops.
 *
 * etcd writes to `<state-dir>/etcd.log` directly, not through a pipe to the agent, so it keeps
 * running if the agent itself is killed; its pid goes to `<state-dir>/etcd.pid`. A restarted agent
 * first stops an etcd left running on the same data dir (found by that pid file, or by its
 * `--data-dir` flag in /proc), so two etcd processes never share a data dir.
 *
 * An etcd that exits saying its member was removed from the cluster is not restarted: its data
 * dir can never serve again, and what to do with it is the agent's decision (`removed`).
 *
 * Before the first start it asks the binary its version (`etcd --version`) and looks the flags up
 * in that version's entry of the table (src/node/etcd/versions.ts): a flag that version refuses is
 * reported at once, with what to pass instead, rather than as five crashes in a row.
 * @module
 */
import { spawn, type ChildProcess } from "node:child_process";
import { closeSync, fstatSync, mkdirSync, openSync } from "node:fs";
import { isAlive, processArgv } from "../../proc.ts";
import { processesWithArgument, stopChild, terminate } from "../../etcd/etcd-process.ts";
import type { StateDir } from "../files/state-files.ts";
import { GaveUp } from "../core/errors.ts";
import { etcdError } from "../../etcd/etcd-log.ts";
import { readLogFrom, readLogSince, readLogTail, rotateLog } from "./etcd-log-file.ts";
import { ETCD_MINORS, detectEtcdVersion, etcdTraits, refusedFlag, type EtcdMinor, type EtcdTraits } from "../../etcd/versions.ts";

/** More unexpected exits than this within RESTART_WINDOW_MS and the supervisor gives up. */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 120_000;
/** etcd's words when peers tell it that its member was removed (every version's, until the binary's is known). */
const ANY_REMOVED_MESSAGES = [...new Set(ETCD_MINORS.flatMap((m) => etcdTraits(m).removedMessages))];
/**
 * etcd's words when it cannot reach any peer to fetch the member list (a partition, a link down):
 * a failure the network heals, so it never counts toward giving up. It is retried with backoff
 * while the admission lives (the heartbeat keeps it); the lease, not this count, bounds it.
 */
const PEERS_UNREACHABLE = [
  "cannot fetch cluster info from peer urls",
  "could not retrieve cluster information from the given URLs",
  // A peer that answered had not heard of this member yet (cut off while it was added): it
  // catches up once the network heals (campaign seed 43).
  "member count is unequal",
];

/** Whether etcd's exit reason is one the network heals: retried while the admission lives, never counted toward giving up. */
export function healedByNetwork(reason: string | null): boolean {
  return reason !== null && PEERS_UNREACHABLE.some((m) => reason.includes(m));
}
/**
 * etcd's reason for an exit as messages give it (shortened), and whether the network heals it,
 * decided on the whole reason: etcd's conclusion comes after a member dump that a shortened
 * reason may cut (campaign seed 29: four members, and "member count is unequal" was cut off).
 */
export function exitReason(log: string): { reason: string | null; healed: boolean } {
  return { reason: etcdError(log), healed: healedByNetwork(etcdError(log, Infinity)) };
}

export interface SupervisorHooks {
  /** etcd exited without being asked to. */
  onUnexpectedExit?(description: string, willRestart: boolean): void;
  onLeftoverStopped?(pid: number): void;
  /** Right before each etcd process starts (the first and every restart): the data dir may be prepared. */
  beforeSpawn?(): void;
}

export class EtcdSupervisor {
  #child: ChildProcess | null = null;
  #args: string[] = [];
  #stopping = false;
  #exits: number[] = [];
  /** Exits because no peer could be reached, in a row: only the backoff grows with them. */
  #unreachableExits = 0;
  #restartTimer: NodeJS.Timeout | null = null;
  #failure: string | null = null;
  #removed = false;
  #failed!: Promise<string>;
  #fail!: (reason: string) => void;
  /** Size of etcd.log when the current etcd was spawned: what it wrote since starts there. */
  #logStart = 0;
  #version: Promise<{ version: string; minor: EtcdMinor; traits: EtcdTraits }> | null = null;
  /** The binary's table entry, once known (the first start waits for it). */
  #traits: EtcdTraits | null = null;

  constructor(
    readonly bin: string,
    readonly dir: StateDir,
    readonly dataDir: string,
    readonly hooks: SupervisorHooks = {},
  ) {
    this.#resetFailure();
  }

  #resetFailure(): void {
    this.#exits = [];
    this.#unreachableExits = 0;
    this.#failure = null;
    this.#removed = false;
    this.#failed = new Promise((resolve) => (this.#fail = resolve));
  }

  /** Resolves (never rejects) with a reason once etcd keeps failing and will not be restarted. */
  get failed(): Promise<string> {
    return this.#failed;
  }

  get failure(): string | null {
    return this.#failure;
  }

  /** etcd exited saying this member was removed from the cluster (a `failure` too). */
  get removed(): boolean {
    return this.#removed;
  }

  /**
   * Forgets an earlier failure, for an etcd that starts over on a fresh data dir (the agent
   * moved the removed member's data aside). Only while etcd is not running.
   */
  startOver(): void {
    if (this.running) throw new Error("etcd is still running");
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    this.#restartTimer = null;
    this.#resetFailure();
  }

  /** The binary's release and its entry in the version table (asked once; rejects when it cannot run or is unsupported). */
  version(): Promise<{ version: string; minor: EtcdMinor; traits: EtcdTraits }> {
    this.#version ??= detectEtcdVersion(this.bin).then((v) => {
      this.#traits = etcdTraits(v.minor);
      return { ...v, traits: this.#traits };
    });
    this.#version.catch(() => (this.#version = null)); // ask again next time: the binary may be fixed meanwhile
    return this.#version;
  }

  /** Throws GaveUp when the binary cannot run, is not a supported etcd, or refuses one of `args`. */
  async checkFlags(args: readonly string[]): Promise<void> {
    let v: Awaited<ReturnType<EtcdSupervisor["version"]>>;
    try {
      v = await this.version();
    } catch (e) {
      throw new GaveUp(`${this.bin}: ${e instanceof Error ? e.message : String(e)}`);
    }
    const refused = refusedFlag(v.traits, args);
    if (refused) throw new GaveUp(`etcd ${v.version} (${this.bin}) does not take ${refused.flag}: ${refused.reason}`);
  }

  get running(): boolean {
    return this.#child !== null && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  get pid(): number | null {
    return this.running ? this.#child!.pid! : null;
  }

  /** Starts etcd with these flags, after stopping any etcd left running on the same data dir. */
  async start(args: string[]): Promise<void> {
    if (this.#failure) throw new Error(this.#failure);
    this.#args = [...args];
    this.#stopping = false;
    if (this.running) return;
    await this.checkFlags(this.#args);
    await this.stopLeftovers();
    this.#spawn();
  }

  /** Stops etcd: SIGTERM, then SIGKILL after `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    this.#stopping = true;
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    const child = this.#child;
    if (child && this.running) await stopChild(child, new Promise((r) => child.once("exit", r)), graceMs);
    this.dir.removeFile(this.dir.etcdPidPath);
  }

  /**
   * Lets etcd run on after the agent exits: no more restarts, and the agent no longer waits for it.
   * Its pid file stays, so the next agent on this state dir takes it over.
   */
  release(): void {
    this.#stopping = true;
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    this.#child?.unref();
  }

  /** Stops any etcd still running on our data dir that this process did not start. */
  async stopLeftovers(): Promise<void> {
    const marker = `--data-dir=${this.dataDir}`;
    const pids = new Set<number>();
    const fromFile = this.dir.readPid(this.dir.etcdPidPath);
    if (fromFile !== null && isAlive(fromFile) && processArgv(fromFile)?.includes(marker)) pids.add(fromFile);
    for (const pid of processesWithArgument(marker)) pids.add(pid);
    pids.delete(process.pid);
    if (this.#child?.pid) pids.delete(this.#child.pid);
    for (const pid of pids) {
      await terminate(pid);
      this.hooks.onLeftoverStopped?.(pid);
    }
  }

  /** Where in etcd's log the current (or last) etcd started writing. */
  get logStart(): number {
    return this.#logStart;
  }

  /**
   * What etcd's log holds from byte `offset` on (at most SCAN_BYTES, the newest), and where it
   * ends: for reading it as it grows. A log rotated meanwhile is read from its start.
   */
  logFrom(offset: number): { text: string; end: number } {
    return readLogFrom(this.dir.etcdLogPath, offset);
  }

  /** The last `bytes` of etcd's log. */
  logTail(bytes = 4096): string {
    return readLogTail(this.dir.etcdLogPath, bytes);
  }

  #spawn(): void {
    this.hooks.beforeSpawn?.();
    mkdirSync(this.dataDir, { recursive: true, mode: 0o700 });
    rotateLog(this.dir.etcdLogPath);
    const log = openSync(this.dir.etcdLogPath, "a", 0o600);
    this.#logStart = fstatSync(log).size;
    let child: ChildProcess;
    try {
      child = spawn(this.bin, this.#args, { stdio: ["ignore", log, log] });
    } finally {
      closeSync(log);
    }
    this.#child = child;
    child.once("error", (e) => this.#exited(child, `cannot run ${this.bin}: ${e.message}`));
    child.once("exit", (code, signal) => this.#exited(child, signal ? `killed by ${signal}` : `exit code ${code}`));
    if (child.pid) this.dir.writePid(this.dir.etcdPidPath, child.pid);
  }

  #exited(child: ChildProcess, exit: string): void {
    if (this.#child !== child) return;
    if (this.#stopping) return;
    const said = this.#sinceStart();
    // etcd's own reason (a port in use, a bad flag), so that the last word names it.
    const { reason, healed } = exitReason(said);
    const description = reason ? `${exit}: ${reason}` : exit;
    if (this.#saidRemoved(said)) {
      this.#removed = true;
      this.#failure = `etcd ${description}: its member was removed from the cluster, so its data dir cannot serve again`;
      this.hooks.onUnexpectedExit?.(`${description}; it says this member was removed from the cluster`, false);
      this.dir.removeFile(this.dir.etcdPidPath);
      this.#fail(this.#failure);
      return;
    }
    const now = performance.now();
    const unreachable = healed;
    this.#unreachableExits = unreachable ? this.#unreachableExits + 1 : 0;
    if (!unreachable) this.#exits = [...this.#exits.filter((t) => now - t < RESTART_WINDOW_MS), now];
    const willRestart = unreachable || this.#exits.length <= MAX_RESTARTS;
    this.hooks.onUnexpectedExit?.(description, willRestart);
    if (!willRestart) {
      this.#failure = `etcd exited ${this.#exits.length} times within ${RESTART_WINDOW_MS / 1000} s (last: ${description})`;
      this.dir.removeFile(this.dir.etcdPidPath);
      this.#fail(this.#failure);
      return;
    }
    const delay = Math.min(15_000, 500 * 2 ** (Math.max(this.#exits.length, this.#unreachableExits) - 1));
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = null;
      if (!this.#stopping && !this.running) this.#spawn();
    }, delay);
  }

  /** Whether the etcd that just exited logged that its member was removed from the cluster. */
  #saidRemoved(text: string): boolean {
    return (this.#traits?.removedMessages ?? ANY_REMOVED_MESSAGES).some((m) => text.includes(m));
  }

  /** What the etcd that just exited logged (up to the last 256 KiB of it). */
  #sinceStart(): string {
    return readLogSince(this.dir.etcdLogPath, this.#logStart);
  }
}
