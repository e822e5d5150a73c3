/**
 * The installer COMMAND of gate mode, run with `sh -c` in a process group of its own, so that a
 * signal reaches the installer and everything it started in the foreground, and so that a
 * terminal's Ctrl-C reaches it once (through the agent), not twice.
 *
 * Its process group and start time go to `<state-dir>/exec.json` before anything else happens:
 * an agent killed with SIGKILL leaves COMMAND running, and the next agent on this state dir stops
 * that group first, so two installers never drive the same node at once.
 * @module
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { processIds, processStat } from "../../proc.ts";
import { sleep } from "../core/retry.ts";
import { writeFileAtomic } from "../../atomic-file.ts";
import type { StateDir } from "../files/state-files.ts";

export interface CommandExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface RecordedGroup {
  pgid: number;
  /** The leader's start time (clock ticks since boot, /proc/PID/stat field 22): tells a reused PID apart. */
  startTime: string | null;
  command: string;
}

/** "exited with status 3", "was killed by SIGKILL". */
export function describeExit(exit: CommandExit): string {
  return exit.signal ? `was killed by ${exit.signal}` : `exited with status ${exit.code}`;
}

export class ExecCommand {
  readonly #child: ChildProcess;
  #exit: CommandExit | null = null;
  readonly exited: Promise<CommandExit>;

  private constructor(
    readonly command: string,
    readonly dir: StateDir,
    env: NodeJS.ProcessEnv,
    /** Whether this is the installer, recorded for the next agent (not the clean-up command). */
    readonly recorded: boolean,
  ) {
    // stdout is the agent's one `joined cluster` line: COMMAND's output all goes to stderr.
    const child = spawn("/bin/sh", ["-c", command], { stdio: ["ignore", 2, 2], env, detached: true });
    this.#child = child;
    this.exited = new Promise((resolve) => {
      child.once("error", () => resolve(this.#exited({ code: 127, signal: null })));
      child.once("exit", (code, signal) => resolve(this.#exited({ code, signal })));
    });
    if (child.pid && recorded) {
      const record: RecordedGroup = { pgid: child.pid, startTime: startTimeOf(child.pid), command };
      writeFileAtomic(recordPath(dir), `${JSON.stringify(record)}\n`);
    }
  }

  static start(command: string, dir: StateDir, env: NodeJS.ProcessEnv, options: { record?: boolean } = {}): ExecCommand {
    return new ExecCommand(command, dir, env, options.record ?? true);
  }

  #exited(exit: CommandExit): CommandExit {
    this.#exit ??= exit;
    // The group may live on (a daemon the installer left behind is its own business, but it
    // must not be mistaken for a leftover installer by the next agent).
    if (this.recorded) rmSync(recordPath(this.dir), { force: true });
    return this.#exit;
  }

  get pid(): number | null {
    return this.#child.pid ?? null;
  }

  /** null while it runs. */
  get exit(): CommandExit | null {
    return this.#exit;
  }

  get running(): boolean {
    return this.#exit === null;
  }

  /** Sends `signal` to COMMAND's whole process group. */
  signal(signal: NodeJS.Signals): void {
    if (!this.#child.pid || this.#exit) return;
    try {
      process.kill(-this.#child.pid, signal);
    } catch {
      /* gone meanwhile */
    }
  }

  /**
   * `signal` (SIGTERM by default) to the group, SIGKILL after `graceMs`; resolves once the shell
   * exited and nothing is left in its group (also for a shell that had exited already).
   */
  async stop(signal: NodeJS.Signals = "SIGTERM", graceMs = 30_000): Promise<CommandExit> {
    if (!this.#exit) {
      this.signal(signal);
      const timer = setTimeout(() => this.signal("SIGKILL"), graceMs);
      await this.exited;
      clearTimeout(timer);
    }
    const exit = this.#exit!;
    // Whatever of the group outlived the shell gets the same treatment.
    if (this.#child.pid) await stopGroup(this.#child.pid, 5_000);
    return exit;
  }
}

function recordPath(dir: StateDir): string {
  return join(dir.path, "exec.json");
}

/**
 * Stops the COMMAND process group an earlier agent on this state dir started and left running
 * (it was killed, or the machine's service manager restarted it). Returns what was stopped.
 */
export async function stopLeftoverCommand(dir: StateDir): Promise<string | null> {
  let record: RecordedGroup;
  try {
    record = JSON.parse(readFileSync(recordPath(dir), "utf8")) as RecordedGroup;
  } catch {
    return null;
  }
  rmSync(recordPath(dir), { force: true });
  if (!Number.isInteger(record.pgid) || record.pgid <= 1) return null;
  // A leader alive with another start time is a new process that reuses the PID: not ours.
  const leaderStart = startTimeOf(record.pgid);
  if (leaderStart !== null && record.startTime !== null && leaderStart !== record.startTime) return null;
  if (groupMembers(record.pgid).length === 0) return null;
  await stopGroup(record.pgid, 10_000);
  return `'${record.command}' (process group ${record.pgid})`;
}

/** SIGTERM to the group, SIGKILL after `graceMs` if any member is left. */
async function stopGroup(pgid: number, graceMs: number): Promise<void> {
  const signalGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-pgid, signal);
    } catch {
      /* the group is gone */
    }
  };
  if (groupMembers(pgid).length === 0) return;
  signalGroup("SIGTERM");
  const deadline = performance.now() + graceMs;
  while (performance.now() < deadline && groupMembers(pgid).length > 0) await sleep(100);
  if (groupMembers(pgid).length > 0) signalGroup("SIGKILL");
}

/** Live (not zombie) processes of this process group, from /proc. */
function groupMembers(pgid: number): number[] {
  return processIds().filter((pid) => {
    const stat = processStat(pid);
    return stat && stat[2] !== "Z" && Number(stat[4]) === pgid;
  });
}

function startTimeOf(pid: number): string | null {
  return processStat(pid)?.[21] ?? null;
}
