import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ExecCommand, describeExit, stopLeftoverCommand } from "./exec-command.ts";
import { StateDir, isAlive } from "../files/state-files.ts";

const dir = () => new StateDir(mkdtempSync(join(tmpdir(), "jb-exec-")));
const waitFor = async (check: () => boolean) => {
  for (let i = 0; i < 100 && !check(); i++) await new Promise((r) => setTimeout(r, 50));
  return check();
};

describe("ExecCommand", () => {
  it("runs COMMAND with sh -c in its own process group, with the given environment, and reports its status", async () => {
    const d = dir();
    const out = join(d.path, "out");
    const c = ExecCommand.start(`echo "$JOIN_BROKER_ROLE" > ${out}; exit 3`, d, { ...process.env, JOIN_BROKER_ROLE: "join" });
    const exit = await c.exited;
    expect(exit).toEqual({ code: 3, signal: null });
    expect(describeExit(exit)).toBe("exited with status 3");
    expect(readFileSync(out, "utf8")).toBe("join\n");
    expect(existsSync(join(d.path, "exec.json")), "the record goes once COMMAND exited").toBe(false);
  });

  it("stop() signals the whole group: the installer and what it started in the foreground", async () => {
    const d = dir();
    const c = ExecCommand.start("sleep 30 & sleep 30; wait", d, process.env);
    const child = await waitFor(() => existsSync(join(d.path, "exec.json")));
    expect(child).toBe(true);
    const exit = await c.stop("SIGTERM", 5_000);
    expect(describeExit(exit)).toBe("was killed by SIGTERM");
    expect(await waitFor(() => !isAlive(c.pid!))).toBe(true);
  });

  it("a COMMAND group left by a killed agent is stopped by the next one, children included", async () => {
    const d = dir();
    // What a killed agent leaves: a shell in a group of its own, and its exec.json.
    const childPid = join(d.path, "child.pid");
    const c = ExecCommand.start(`sleep 60 & echo $! > ${childPid}; sleep 60`, d, process.env);
    await waitFor(() => existsSync(join(d.path, "exec.json")) && existsSync(childPid) && readFileSync(childPid, "utf8").endsWith("\n"));
    const shell = c.pid!;
    const background = Number(readFileSync(childPid, "utf8"));
    const stopped = await stopLeftoverCommand(d);
    expect(stopped).toMatch(/process group \d+/);
    expect(await waitFor(() => !isAlive(shell) && !isAlive(background))).toBe(true);
    expect(await stopLeftoverCommand(d), "nothing left the second time").toBeNull();
  });

  it("leaves alone a process that reuses the recorded PID", async () => {
    const d = dir();
    const other = spawn("sleep", ["30"], { detached: true, stdio: "ignore" });
    // A record whose leader had another start time: the PID now belongs to someone else.
    const { writeFileAtomic } = await import("../../atomic-file.ts");
    writeFileAtomic(join(d.path, "exec.json"), JSON.stringify({ pgid: other.pid, startTime: "1", command: "x" }));
    expect(await stopLeftoverCommand(d)).toBeNull();
    expect(isAlive(other.pid!)).toBe(true);
    other.kill("SIGKILL");
  });
});
