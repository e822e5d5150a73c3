/** The state-directory lock: one agent per state dir, by exclusive create, stale locks taken over. */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { bootId, isStaleLock, StateDir, StateDirLocked } from "./state-files.ts";

const fresh = () => mkdtempSync(join(tmpdir(), "state-lock-"));
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
});

/** A live process that is not an agent: its command line says nothing of "join". */
async function sleeper(): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
  children.push(child);
  await new Promise((r) => child.once("spawn", r));
  return child;
}

function holdWith(dir: StateDir, pid: number, boot = bootId()): void {
  writeFileSync(dir.lockPath, `${JSON.stringify({ pid, bootId: boot, at: new Date().toISOString() })}\n`);
}

describe("the state-directory lock", () => {
  it("refuses a second agent while the first holds the lock, whatever the holder's command line", async () => {
    const dir = new StateDir(fresh());
    const other = await sleeper();
    holdWith(dir, other.pid!);
    expect(() => new StateDir(dir.path).lock()).toThrow(StateDirLocked);
    try {
      new StateDir(dir.path).lock();
    } catch (e) {
      expect([(e as StateDirLocked).code, (e as StateDirLocked).holderPid]).toEqual(["ERR_STATE_DIR_LOCKED", other.pid]);
    }
    expect(JSON.parse(readFileSync(dir.lockPath, "utf8")).pid).toBe(other.pid); // left alone
  });

  it("lets exactly one of many claimants win (exclusive create), and releases on unlock", () => {
    const path = fresh();
    const claimants = Array.from({ length: 20 }, () => new StateDir(path));
    const won = claimants.filter((d) => {
      try {
        d.lock();
        return true;
      } catch (e) {
        if (!(e instanceof StateDirLocked)) throw e;
        return false;
      }
    });
    expect(won).toHaveLength(1);
    expect(JSON.parse(readFileSync(won[0]!.lockPath, "utf8")).pid).toBe(process.pid);
    claimants[claimants.indexOf(won[0]!) === 0 ? 1 : 0]!.unlock(); // a loser's unlock changes nothing
    expect(existsSync(won[0]!.lockPath)).toBe(true);
    won[0]!.unlock();
    expect(existsSync(won[0]!.lockPath)).toBe(false);
    const next = new StateDir(path);
    next.lock();
    next.unlock();
  });

  it("takes over the lock of a dead agent", async () => {
    const dir = new StateDir(fresh());
    const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    await new Promise((r) => child.once("exit", r));
    holdWith(dir, child.pid!);
    dir.lock();
    expect(JSON.parse(readFileSync(dir.lockPath, "utf8")).pid).toBe(process.pid);
    dir.unlock();
  });

  it("takes over a lock taken before the last reboot, even when its pid runs again", async () => {
    const other = await sleeper();
    expect(isStaleLock({ pid: other.pid!, bootId: "an-earlier-boot", at: "" }, "this-boot")).toBe(true);
    expect(isStaleLock({ pid: other.pid!, bootId: "this-boot", at: "" }, "this-boot")).toBe(false);
    // Where the boot id is unknown, a live pid holds the lock.
    expect(isStaleLock({ pid: other.pid!, bootId: "", at: "" }, "")).toBe(false);
  });

  it("gives a lock file being written (no content yet) time before calling it stale", () => {
    const dir = new StateDir(fresh());
    writeFileSync(dir.lockPath, "");
    expect(() => new StateDir(dir.path).lock()).toThrow(StateDirLocked);
  });
});
