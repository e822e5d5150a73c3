// A temporary directory per `npm test` step (its TMPDIR), removed when the step ends: whatever a
// test forgot to remove, or a killed process left behind (etcd data, broker state, certificate
// authorities), goes with it instead of piling up in /tmp run after run.
//
// Names that every process on the machine must share (scripts/claims.mjs, the lab's record of the
// mount points it made) stay in the machine's own temp directory: a step is told where it is in
// MACHINE_TMPDIR_ENV, and machineTmpdir() reads it back.
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The environment variable naming the machine's temp directory in a step whose TMPDIR is its own. */
export const MACHINE_TMPDIR_ENV = "JOIN_BROKER_MACHINE_TMPDIR";

/** The temp directory every process on the machine shares (not a step's own). */
export function machineTmpdir() {
  return process.env[MACHINE_TMPDIR_ENV] || tmpdir();
}

/**
 * The steps' temp directories of one run, under one directory of the machine's temp directory
 * (short: a unix socket's path must stay under 108 bytes).
 */
export function stepTmpDirs(base = machineTmpdir()) {
  const root = mkdtempSync(join(base, "jb-steps-"));
  // As /tmp is to every user: a test's process that runs as another user (k0s runs etcd as
  // `etcd`) must reach what it is given in the step's TMPDIR.
  chmodSync(root, 0o755);
  return {
    root,
    /** The step's TMPDIR, made empty, and the environment that gives it to the step. */
    make(id) {
      const dir = join(root, id);
      mkdirSync(dir, { recursive: true });
      chmodSync(dir, 0o1777);
      return { dir, env: { TMPDIR: dir, [MACHINE_TMPDIR_ENV]: base } };
    },
    /**
     * Removes the step's TMPDIR and says what was left in it (its top-level entries), or why it
     * could not. Never while a mount is inside it: removing through a bind mount would remove the
     * files it shows, wherever they are (rm's --one-file-system does not see a bind mount of the
     * same file system).
     */
    remove(id) {
      const dir = join(root, id);
      let left;
      try {
        left = readdirSync(dir);
      } catch {
        return { left: [], error: null };
      }
      const mounts = mountPointsUnder(dir);
      if (mounts.length)
        return { left, error: `not removed: ${mounts.length} mount${mounts.length === 1 ? " is" : "s are"} left inside it (${mounts.join(", ")})` };
      try {
        rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
        return { left, error: null };
      } catch (e) {
        return { left, error: e instanceof Error ? e.message : String(e) };
      }
    },
    /** Removes the run's directory once every step's is gone (left in place if one could not be). */
    close() {
      try {
        rmdirSync(root);
      } catch {
        /* a step's directory could not be removed: said when it was tried */
      }
    },
  };
}

/** The mount points (this process's mount namespace) at or under `dir`. */
function mountPointsUnder(dir) {
  let info;
  try {
    info = readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return [];
  }
  // The fifth field, with space, tab, newline and backslash written as octal escapes.
  const points = info.split("\n").map((line) => (line.split(" ")[4] ?? "").replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8))));
  return points.filter((p) => p === dir || p.startsWith(`${dir}/`));
}
