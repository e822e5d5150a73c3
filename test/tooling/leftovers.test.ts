/**
 * The processes a step of `npm test` left running: found by the marker in their environment,
 * detached or not, and stopped (scripts/leftovers.mjs).
 */
import { spawn } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { STEP_MARKER, markedProcesses, stopMarkedProcesses } from "../../scripts/leftovers.mjs";

const started: number[] = [];
afterEach(() => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* gone */
    }
  }
});

function sleeper(env: Record<string, string>): number {
  // Detached and in its own session, as a test's wrangler or etcd is: no process group ties it to the step.
  const child = spawn("sleep", ["300"], { env: { ...process.env, ...env }, detached: true, stdio: "ignore" });
  child.unref();
  started.push(child.pid!);
  return child.pid!;
}

describe("a step's leftover processes", () => {
  it("finds and stops only the processes that carry the step's marker", async () => {
    const value = `leftovers-test:${process.pid}:${Date.now()}`;
    const marked = sleeper({ [STEP_MARKER]: value });
    const other = sleeper({ [STEP_MARKER]: `${value}-other` });
    const unmarked = sleeper({});
    expect(markedProcesses(value)).toEqual([{ pid: marked, name: "sleep" }]);
    expect(stopMarkedProcesses(value).map((p) => p.pid)).toEqual([marked]);
    const deadline = Date.now() + 10_000;
    while (markedProcesses(value).length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(markedProcesses(value)).toEqual([]);
    for (const pid of [other, unmarked]) expect(() => process.kill(pid, 0)).not.toThrow();
  });
});
