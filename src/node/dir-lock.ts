/**
 * An exclusive lock on a directory, for the programs that must never share one: the agent's
 * state directory and `serve`'s data directory. The lock file is created with O_EXCL, so of two
 * claimants only one can create it, whatever either sees in /proc. A lock whose holder is gone
 * (its pid no longer runs, or it was taken before the last reboot) is stale and taken over.
 * @module
 */
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { bootId, isAlive } from "./proc.ts";

export { bootId, isAlive };

/** What the lock file says about its holder. */
export interface LockHolder {
  pid: number;
  /** The kernel's boot id when the lock was taken ("" where unknown): a lock from before a reboot is stale. */
  bootId: string;
  at: string;
}

/** A lock file being written by its creator right now has no content yet; give it this long. */
const HALF_WRITTEN_LOCK_MS = 5_000;

export class DirLock {
  #holding = false;
  #releaseOnExit = () => this.unlock();

  constructor(
    /** The lock file. */
    readonly path: string,
    /** The error to throw when a live holder (pid, or null when unknown) has the lock. */
    private readonly held: (holderPid: number | null) => Error,
  ) {}

  /** Takes the lock, or throws `held(...)`. Released by `unlock()` and, failing that, at process exit. */
  lock(): void {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        const fd = openSync(this.path, "wx", 0o600);
        try {
          writeSync(fd, `${JSON.stringify({ pid: process.pid, bootId: bootId(), at: new Date().toISOString() } satisfies LockHolder)}\n`);
          fsyncSync(fd);
        } finally {
          closeSync(fd);
        }
        this.#holding = true;
        process.once("exit", this.#releaseOnExit);
        return;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      }
      const holder = readLockHolder(this.path);
      if (holder && !isStaleLock(holder)) throw this.held(holder.pid);
      if (!holder && ageMs(this.path) < HALF_WRITTEN_LOCK_MS) throw this.held(null);
      // Stale: move it aside under a name of our own, and make sure what we moved was the stale
      // lock (another claimant may have replaced it meanwhile); then try to create ours again.
      const aside = `${this.path}.stale-${process.pid}-${attempt}`;
      try {
        renameSync(this.path, aside);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") continue;
        throw e;
      }
      const moved = readLockHolder(aside);
      if (moved && holder && (moved.pid !== holder.pid || moved.at !== holder.at) && !isStaleLock(moved)) {
        // A live claimant's fresh lock: put it back and give way.
        renameSync(aside, this.path);
        throw this.held(moved.pid);
      }
      rmSync(aside, { force: true });
    }
    throw this.held(null);
  }

  /** Releases the lock if this object holds it. */
  unlock(): void {
    if (!this.#holding) return;
    this.#holding = false;
    process.removeListener("exit", this.#releaseOnExit);
    const holder = readLockHolder(this.path);
    if (holder?.pid === process.pid) rmSync(this.path, { force: true });
  }
}

function readLockHolder(path: string): LockHolder | null {
  let holder: Partial<LockHolder> | null;
  try {
    holder = JSON.parse(readFileSync(path, "utf8")) as Partial<LockHolder> | null;
  } catch {
    return null; // gone, or not (yet) written
  }
  return holder && Number.isInteger(holder.pid) && (holder.pid as number) > 0
    ? { pid: holder.pid!, bootId: String(holder.bootId ?? ""), at: String(holder.at ?? "") }
    : null;
}

/** A holder is gone when its pid runs no more, or when it took the lock before the last reboot. Live otherwise, even when /proc says nothing. */
export function isStaleLock(holder: LockHolder, currentBootId = bootId()): boolean {
  if (holder.bootId && currentBootId && holder.bootId !== currentBootId) return true;
  return !isAlive(holder.pid);
}

function ageMs(path: string): number {
  try {
    return Date.now() - statSync(path).mtimeMs;
  } catch {
    return Infinity;
  }
}
