/**
 * What Linux's /proc says about processes, read in one place: which processes run, their
 * arguments and `stat` fields, whether one is alive, and the kernel's boot id. Elsewhere (no
 * /proc) every reader answers "unknown" (null, [] or ""), and each caller says what that means.
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";

/** Every process id /proc lists ([] without /proc). */
export function processIds(): number[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  return entries.filter((e) => /^\d+$/.test(e)).map(Number);
}

/** The process's arguments, or null when they cannot be read (gone, or no /proc). */
export function processArgv(pid: number): string[] | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  } catch {
    return null;
  }
}

/**
 * /proc/PID/stat split into fields, numbered as proc(5) numbers them less one (the command name,
 * which may hold spaces, kept as one field: [1]; the state [2]; the process group [4]; the start
 * time [21]); null when it cannot be read.
 */
export function processStat(pid: number): string[] | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  const close = text.lastIndexOf(")");
  return [
    text.slice(0, text.indexOf(" ")),
    text.slice(text.indexOf("(") + 1, close),
    ...text
      .slice(close + 2)
      .trim()
      .split(/\s+/),
  ];
}

/** Whether the process exists and is not a zombie (an exited child nobody reaped yet). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  const stat = processStat(pid);
  return stat ? stat[2] !== "Z" : true; // no /proc: trust kill(0)
}

/** The kernel's boot id (Linux), or "" where there is none. */
export function bootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return "";
  }
}
