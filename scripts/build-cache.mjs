// What the scripts that build or fetch something once per machine share (scripts/etcd.mjs,
// scripts/kube.mjs, scripts/k0s.mjs, scripts/package.mjs): the cache directory, a lock file that
// makes a second process wait for the first one's build, the locked build in a scratch directory,
// the Go settings of those builds, and running a long build step with its progress on stderr.
import { execFileSync, spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** $XDG_CACHE_HOME or ~/.cache, under etcd-join-broker: where every per-machine build lives. */
export function projectCacheDir() {
  return join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "etcd-join-broker");
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
}

const STALE_LOCK_MS = 60 * 60 * 1000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function readLock(path) {
  try {
    const text = readFileSync(path, "utf8").trim();
    return { text, holder: Number(text), age: Date.now() - statSync(path).mtimeMs };
  } catch {
    return null; // released meanwhile
  }
}

/** Held by a process that died, or far longer than any build takes (its pid reused since). */
function isStale(lock) {
  if (lock.age > STALE_LOCK_MS) return true;
  if (!Number.isInteger(lock.holder) || lock.holder <= 0) return lock.age > 5_000; // its pid is still being written
  return !alive(lock.holder);
}

/**
 * Removes a stale lock, unless it changed since it was seen. Removers take turns (mkdir is
 * atomic), and a lock file is only ever created where none is (`wx`), so between the second look
 * and the removal nobody else can put a live lock there: two processes never both take over.
 */
async function removeStale(path, seen) {
  const guard = `${path}.takeover`;
  try {
    mkdirSync(guard);
  } catch (e) {
    if (e.code !== "EEXIST") throw e;
    try {
      if (Date.now() - statSync(guard).mtimeMs > 60_000) rmSync(guard, { recursive: true, force: true }); // left by a crash
    } catch {
      /* gone meanwhile */
    }
    await sleep(200);
    return;
  }
  try {
    const again = readLock(path);
    if (again && again.text === seen.text && isStale(again)) rmSync(path, { force: true });
  } finally {
    rmSync(guard, { recursive: true, force: true });
  }
}

/**
 * Takes the lock file `path` (e.g. `<cache>/<release>.lock`), waiting while a live process holds it;
 * returns its release function. `tag` prefixes the waiting message.
 */
export async function lock(path, what, log, tag = "etcd") {
  let announced = false;
  for (;;) {
    try {
      const fd = openSync(path, "wx");
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(path, { force: true });
    } catch (e) {
      if (e.code !== "EEXIST") throw e;
    }
    const seen = readLock(path);
    if (!seen) continue;
    if (isStale(seen)) {
      await removeStale(path, seen);
      continue;
    }
    if (!announced) log(`[${tag}] process ${seen.holder || "?"} is building ${what}; waiting for it`);
    announced = true;
    await sleep(1_000);
  }
}

/**
 * Runs one build step: its stdout passes through, its stderr goes to ours (its last lines kept for
 * the error), and `[tag] label: N s` is logged every 20 s so a long step does not look hung.
 */
export function run(cmd, args, { cwd, env, label, log, tag }) {
  return new Promise((ok, fail) => {
    const started = Date.now();
    const child = spawn(cmd, args, { cwd, env, stdio: ["ignore", "inherit", "pipe"] });
    let tail = "";
    child.stderr.on("data", (chunk) => {
      process.stderr.write(chunk);
      tail = (tail + chunk.toString()).slice(-4_000);
    });
    const beat = setInterval(() => log(`[${tag}] ${label}: ${Math.round((Date.now() - started) / 1000)} s`), 20_000);
    child.once("error", (e) => {
      clearInterval(beat);
      fail(new Error(`cannot run ${cmd}: ${e.message}`));
    });
    child.once("exit", (code, signal) => {
      clearInterval(beat);
      if (code === 0) ok();
      else fail(new Error(`${label} failed (${signal ?? `exit code ${code}`}): ${cmd} ${args.join(" ")}\n${tail.trim().split("\n").slice(-15).join("\n")}`));
    });
  });
}

/**
 * Builds something once per machine: under the lock `<cache>/<key>.lock`, in the scratch directory
 * `<cache>/.build-<key>-<pid>` (removed at the end, whatever happens; `locked` names what the lock
 * guards when it is more than `what`). `built()` is asked first,
 * under the lock: a path when another process built it while we waited. Otherwise scratch
 * directories a killed build of this key left are removed, and `make(work)` builds and moves the
 * result into the cache, resolving with its path; `[tag] built <what> in N s` is logged after it.
 */
export async function buildOnce({ cache, key, what, locked = what, tag, log, built, make }) {
  mkdirSync(cache, { recursive: true });
  const unlock = await lock(join(cache, `${key}.lock`), locked, log, tag);
  const work = join(cache, `.build-${key}-${process.pid}`);
  try {
    const done = built();
    if (done) return done;
    // Under the lock nobody else builds this key: a scratch directory left is a killed build's.
    for (const left of readdirSync(cache).filter((f) => f.startsWith(`.build-${key}-`))) rmSync(join(cache, left), { recursive: true, force: true });
    mkdirSync(work, { recursive: true });
    const started = Date.now();
    const path = await make(work);
    log(`[${tag}] built ${what} in ${Math.round((Date.now() - started) / 1000)} s`);
    return path;
  } finally {
    rmSync(work, { recursive: true, force: true });
    unlock();
  }
}

/** Writes `file` as the JSON record of a build: `fields`, the Go that built it, when, and its seconds since `started`. */
export function writeBuildRecord(file, go, started, fields) {
  const record = {
    ...fields,
    go: execFileSync(go, ["env", "GOVERSION"], { encoding: "utf8" }).trim(),
    builtAt: new Date().toISOString(),
    seconds: Math.round((Date.now() - started) / 100) / 10,
  };
  writeFileSync(file, `${JSON.stringify(record, null, 2)}\n`);
}

/**
 * The environment of a Go build of a tool the tests run (etcd, Kubernetes, k0s): no workspace, no
 * VCS stamp, and a quarter less compiler CPU than Go's defaults — no DWARF in the objects (the
 * binaries are linked with -s -w anyway) and the compiler's heap left to grow four times before a
 * collection (GOGC=400: the compiles' memory stays far inside a 2-core machine's). Cold, these
 * builds are most of a clean clone's CI time. `GOGC` and `GOFLAGS` already set are kept, and
 * `extraFlags` (e.g. "-mod=mod") appended.
 */
export function goBuildEnv(env = process.env, extraFlags = []) {
  const flags = [env.GOFLAGS ?? "", "-buildvcs=false", "-gcflags=all=-dwarf=false", ...extraFlags].filter(Boolean);
  return { ...env, GOWORK: "off", GOGC: env.GOGC ?? "400", GOFLAGS: flags.join(" ") };
}
