// Processes a step left running. Each step's environment carries a marker that every process it
// starts inherits, detached or not (wrangler's workerd, an etcd, a lab host's k0s); once the
// step's own process has exited, whatever still carries its marker was left behind: a test that
// timed out before its clean-up, say. Left alone, such a process may use CPU for the rest of the
// run. Linux only (/proc); elsewhere none are found.
import { readdirSync, readFileSync } from "node:fs";

/** The environment variable that marks a step's processes. */
export const STEP_MARKER = "JOIN_BROKER_TEST_STEP";

/** The processes (pid and command name) whose environment holds `STEP_MARKER=value`. */
export function markedProcesses(value) {
  const wanted = `${STEP_MARKER}=${value}`;
  const found = [];
  let pids;
  try {
    pids = readdirSync("/proc").filter((p) => /^\d+$/.test(p));
  } catch {
    return found;
  }
  for (const pid of pids) {
    if (Number(pid) === process.pid) continue;
    try {
      if (!readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").includes(wanted)) continue;
      found.push({ pid: Number(pid), name: readFileSync(`/proc/${pid}/comm`, "utf8").trim() });
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** SIGKILLs the processes marked `value`; returns what it found. */
export function stopMarkedProcesses(value) {
  const found = markedProcesses(value);
  for (const { pid } of found) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
  return found;
}
