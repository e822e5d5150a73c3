// Machine-wide claims on names that test processes running at once must not share: a loopback
// port (scripts/ports.mjs), a lab's subnet (test/lab/lab.ts), a short lock. Every process of every
// checkout on the machine sees the same claims: a file per name under the temp directory,
// created only where none is (`wx`) and holding the claimant's pid. A claim ends with its
// process (released at exit; one left by a process that died is taken over by the next claimant).
//
// Taking over a dead claimant's file is safe against two takers at once, the way build-cache.mjs
// takes over a lock: takers take turns (mkdir is atomic), each looks again under its turn, and a
// file is only ever created where none is, so nobody can put a live claim there in between.
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import { machineTmpdir } from "./step-tmp.mjs";

/** Where the claims live: one directory per kind (in the machine's temp directory, not a test step's own). */
export const CLAIMS_DIR = join(machineTmpdir(), "join-broker-claims");

/** A test process never runs this long: a claim this old is its pid reused by something else. */
const STALE_MS = 24 * 60 * 60 * 1000;

/** kind/key → file, for the claims this process holds. */
const held = new Map();

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
}

function claimFile(kind, key) {
  if (!/^[a-z0-9-]+$/.test(kind) || !/^[A-Za-z0-9._-]+$/.test(String(key))) throw new Error(`a claim is [a-z0-9-]+/[A-Za-z0-9._-]+, not ${kind}/${key}`);
  return join(CLAIMS_DIR, kind, String(key));
}

function readClaim(file) {
  try {
    const text = readFileSync(file, "utf8").trim();
    return { text, holder: Number(text), age: Date.now() - statSync(file).mtimeMs };
  } catch {
    return null; // released meanwhile
  }
}

function isStale(claim) {
  if (claim.age > STALE_MS) return true;
  if (!Number.isInteger(claim.holder) || claim.holder <= 0) return claim.age > 5_000; // its pid is still being written
  // This process's own pid on a claim it does not hold: a dead process's, whose pid it reuses.
  return claim.holder === process.pid || !alive(claim.holder);
}

/** Removes a dead claimant's file, unless it changed since it was seen; false when another taker had the turn. */
function takeOver(file, seen) {
  const turn = `${file}.takeover`;
  try {
    mkdirSync(turn);
  } catch (e) {
    if (e.code !== "EEXIST") throw e;
    try {
      if (Date.now() - statSync(turn).mtimeMs > 60_000) rmSync(turn, { recursive: true, force: true }); // left by a crash
    } catch {
      /* gone meanwhile */
    }
    return false;
  }
  try {
    const again = readClaim(file);
    if (again && again.text === seen.text && isStale(again)) rmSync(file, { force: true });
    return true;
  } finally {
    rmSync(turn, { recursive: true, force: true });
  }
}

let releaseAtExit = false;

/**
 * Claims `kind`/`key` for this process: true when it is now this process's (or already was),
 * false while another live process holds it.
 * @param {string} kind @param {string | number} key @returns {boolean}
 */
export function claim(kind, key) {
  const file = claimFile(kind, key);
  if (held.has(file)) return true;
  mkdirSync(join(CLAIMS_DIR, kind), { recursive: true });
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(file, "wx");
      writeSync(fd, String(process.pid));
      closeSync(fd);
      held.set(file, true);
      if (!releaseAtExit) {
        releaseAtExit = true;
        process.once("exit", releaseAll);
      }
      return true;
    } catch (e) {
      if (e.code !== "EEXIST") throw e;
    }
    const seen = readClaim(file);
    if (seen && !isStale(seen)) return false;
    if (seen && !takeOver(file, seen)) return false;
  }
  return false;
}

/** Ends this process's claim on `kind`/`key` (nothing when it holds none). */
export function release(kind, key) {
  const file = claimFile(kind, key);
  if (!held.delete(file)) return;
  if (readClaim(file)?.holder === process.pid) rmSync(file, { force: true });
}

function releaseAll() {
  for (const file of held.keys()) {
    try {
      if (readClaim(file)?.holder === process.pid) rmSync(file, { force: true });
    } catch {
      /* exiting anyway */
    }
  }
  held.clear();
}

const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Runs `fn` while this process holds the machine-wide lock `name` (a claim of kind `locks`),
 * waiting while another live process holds it; for short critical sections only.
 * @template T @param {string} name @param {() => T} fn @returns {T}
 */
export function withMachineLock(name, fn) {
  const deadline = Date.now() + 60_000;
  while (!claim("locks", name)) {
    if (Date.now() > deadline) throw new Error(`the machine-wide lock ${name} (${claimFile("locks", name)}) was held for over 60 s`);
    Atomics.wait(pause, 0, 0, 20);
  }
  try {
    return fn();
  } finally {
    release("locks", name);
  }
}
