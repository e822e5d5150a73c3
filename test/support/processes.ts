/**
 * What /proc says of the processes the stack started: who runs below whom, and how much memory
 * each holds (the benchmarks' figures, the broker's workerd).
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";

/** Every process below `root` (children, grandchildren, …), nearest first. */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // The command name is in parentheses and may contain spaces: the ppid follows the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(entry));
      children.set(ppid, list);
    } catch {
      /* exited meanwhile */
    }
  }
  const found: number[] = [];
  const queue = [...(children.get(root) ?? [])];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    found.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return found;
}

/** A process's command line, as one string with NUL separators ("" once it is gone). */
export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return "";
  }
}

/** The processes below `root` whose command name is `name`. */
export function descendants(root: number, name: string): number[] {
  return processTree(root).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === name;
    } catch {
      return false;
    }
  });
}

/** VmRSS and VmHWM (peak RSS) of a process, in bytes. */
export function processMemory(pid: number): { rssBytes: number; peakRssBytes: number } | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) * 1024;
    return { rssBytes: kb("VmRSS"), peakRssBytes: kb("VmHWM") };
  } catch {
    return null;
  }
}
