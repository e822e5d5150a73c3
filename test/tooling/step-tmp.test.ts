/**
 * scripts/step-tmp.mjs: an `npm test` step's own TMPDIR, which its processes use as their temp
 * directory while the machine-wide claims stay shared, and which goes with what was left in it,
 * never through a mount.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { stepTmpDirs } from "../../scripts/step-tmp.mjs";

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function base(): string {
  const dir = mkdtempSync(join(tmpdir(), "step-tmp-test-"));
  made.push(dir);
  return dir;
}

const STEP_TMP = join(import.meta.dirname, "../../scripts/step-tmp.mjs");
const CLAIMS = join(import.meta.dirname, "../../scripts/claims.mjs");

describe("a step's temporary directory", () => {
  it("is the step's temp directory, while the claims stay in the machine's", () => {
    const machine = base();
    const steps = stepTmpDirs(machine);
    const { dir, env } = steps.make("e2e-etcd-3.6");
    const script = `import { tmpdir } from "node:os"; import { machineTmpdir } from ${JSON.stringify(STEP_TMP)}; import { CLAIMS_DIR } from ${JSON.stringify(CLAIMS)};
      console.log(JSON.stringify({ tmp: tmpdir(), machine: machineTmpdir(), claims: CLAIMS_DIR }));`;
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { env: { ...process.env, ...env }, encoding: "utf8" });
    expect(JSON.parse(out)).toEqual({ tmp: dir, machine, claims: join(machine, "join-broker-claims") });
    expect(dir.startsWith(join(steps.root, ""))).toBe(true);
    // As /tmp: any user reaches it and writes in it (k0s's etcd runs as `etcd`).
    expect(statSync(steps.root).mode & 0o7777).toBe(0o755);
    expect(statSync(dir).mode & 0o7777).toBe(0o1777);
  });

  it("is removed with what was left in it, which is said", () => {
    const steps = stepTmpDirs(base());
    const { dir } = steps.make("unit");
    mkdirSync(join(dir, "join-broker-state-x/v3"), { recursive: true });
    writeFileSync(join(dir, "join-broker-state-x/v3/db"), "x");
    writeFileSync(join(dir, "stray"), "y");
    expect(steps.remove("unit")).toEqual({ left: ["join-broker-state-x", "stray"], error: null });
    expect(existsSync(dir)).toBe(false);
    expect(steps.remove("unit")).toEqual({ left: [], error: null });
    steps.close();
    expect(existsSync(steps.root)).toBe(false);
  });

  it.skipIf(process.getuid?.() !== 0)("never removes through a mount left inside it", () => {
    const outside = base();
    writeFileSync(join(outside, "keep"), "kept");
    const steps = stepTmpDirs(base());
    const { dir } = steps.make("lab");
    const mountPoint = join(dir, "bound");
    mkdirSync(mountPoint);
    execFileSync("mount", ["--bind", outside, mountPoint]);
    try {
      const { left, error } = steps.remove("lab");
      expect(left).toEqual(["bound"]);
      expect(error).toMatch(/not removed: 1 mount is left inside it .*\/bound\)/);
      expect(existsSync(join(outside, "keep"))).toBe(true);
    } finally {
      spawnSync("umount", [mountPoint]);
    }
    expect(steps.remove("lab").error).toBeNull();
    expect(existsSync(dir)).toBe(false);
  });
});
