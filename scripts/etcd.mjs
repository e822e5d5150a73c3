#!/usr/bin/env node
// The etcd binaries the project is tested against, one per minor version (scripts/etcd-versions.json).
//
//   node scripts/etcd.mjs path VERSION   absolute path of that version's etcd (etcdctl beside it),
//                                        building it first if needed; VERSION is 3.4, 3.5, 3.6 or 3.7
//   node scripts/etcd.mjs list           every version, its exact release and path (builds what is missing)
//   node scripts/etcd.mjs list --no-build   the same without building: "not built" instead
//
// 3.4 is Debian's etcd-server (installed with apt-get when missing and we are root). 3.5 and later
// are built from their Go modules: a tiny `main` calling go.etcd.io/etcd/server/v3/etcdmain.Main
// for etcd, and one calling go.etcd.io/etcd/etcdctl/v3/ctlv3 for etcdctl, once per machine, into
// $JOIN_BROKER_ETCD_CACHE (default ~/.cache/etcd-join-broker/etcd/<release>/), reusing Go's module and
// build caches. Two processes asking at once build once: a lock file per release makes the second
// wait, and the finished directory appears by an atomic rename, so a half-built one is never used.
// Progress goes to stderr, the answer to stdout; on failure the reason goes to stderr and the exit
// code is 1.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { buildOnce, goBuildEnv, projectCacheDir, run, writeBuildRecord } from "./build-cache.mjs";
import { ensureTool, executable, findGo } from "./tools.mjs";

const PINS = JSON.parse(readFileSync(new URL("./etcd-versions.json", import.meta.url), "utf8"));

/** The minor versions, oldest first: ["3.4", "3.5", "3.6", "3.7"]. */
export const ETCD_MINORS = Object.keys(PINS).filter((k) => /^\d+\.\d+$/.test(k));

/** What is pinned for one minor version: `{ minor, release, source: "debian" | "go" }`. */
export function etcdPin(version) {
  const minor = normalizeMinor(version);
  return { minor, ...PINS[minor] };
}

/** "3.6", "v3.6", "3.6.16" (the pinned release) → "3.6"; anything else throws with the choices. */
export function normalizeMinor(version) {
  const v = String(version ?? "")
    .trim()
    .replace(/^v/, "");
  const m = /^(\d+\.\d+)(?:\.(\d+))?$/.exec(v);
  if (m && PINS[m[1]] && (m[2] === undefined || PINS[m[1]].release === v || PINS[m[1]].source === "debian")) return m[1];
  const known = ETCD_MINORS.map((k) => `${k} (${PINS[k].release})`).join(", ");
  throw new Error(`unknown etcd version '${version}': choose one of ${known}`);
}

/** Where built releases live: $JOIN_BROKER_ETCD_CACHE, else $XDG_CACHE_HOME or ~/.cache, under etcd-join-broker/etcd. */
export function etcdCacheDir() {
  if (process.env.JOIN_BROKER_ETCD_CACHE) return resolve(process.env.JOIN_BROKER_ETCD_CACHE);
  return join(projectCacheDir(), "etcd");
}

/** The release a binary reports (`etcd --version` → "3.6.16"), or null when it cannot be run. */
export function binaryRelease(bin) {
  try {
    const out = execFileSync(bin, ["--version"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 20_000 });
    return /etcd Version:\s*(\d+\.\d+\.\d+)/.exec(out)?.[1] ?? null;
  } catch {
    return null;
  }
}

/** The path of an already-available etcd of this version, or null (never builds or installs). */
export function cachedEtcdPath(version) {
  const pin = etcdPin(version);
  if (pin.source === "debian") {
    const bin = debianEtcd();
    return bin && binaryRelease(bin)?.startsWith(`${pin.minor}.`) ? bin : null;
  }
  const bin = join(etcdCacheDir(), pin.release, "etcd");
  return executable(bin) && executable(join(etcdCacheDir(), pin.release, "etcdctl")) ? bin : null;
}

/**
 * The absolute path of this version's etcd, etcdctl beside it: Debian's for 3.4 (installed when
 * missing and we are root), built from Go modules for the others (once per machine). Throws an
 * Error whose message says why not. `log` receives progress lines (default: stderr).
 */
export async function ensureEtcd(version, { log = (line) => process.stderr.write(`${line}\n`) } = {}) {
  const pin = etcdPin(version);
  if (pin.source === "debian") return ensureDebianEtcd(pin);
  const cached = cachedEtcdPath(pin.minor);
  if (cached) return cached;
  return buildFromModules(pin, log);
}

/** Every version: `{ minor, release, source, path | null, reported }` (reported = what the binary says). */
export async function listEtcd({ build = true, log } = {}) {
  const out = [];
  for (const minor of ETCD_MINORS) {
    const pin = etcdPin(minor);
    let path = null;
    let error = null;
    try {
      path = build ? await ensureEtcd(minor, { log }) : cachedEtcdPath(minor);
    } catch (e) {
      error = e instanceof Error ? e.message : String(e);
    }
    out.push({ ...pin, path, reported: path ? binaryRelease(path) : null, error });
  }
  return out;
}

// --- 3.4: Debian ---------------------------------------------------------------------------------

const DEBIAN_CANDIDATES = ["/usr/bin/etcd", "/usr/local/bin/etcd"];

function debianEtcd() {
  return DEBIAN_CANDIDATES.find(executable) ?? null;
}

function ensureDebianEtcd(pin) {
  let bin = debianEtcd();
  if (!bin) {
    // scripts/tools.mjs installs etcd-server; ETCD_BIN must not stand in for "3.4" here.
    const saved = process.env.ETCD_BIN;
    delete process.env.ETCD_BIN;
    try {
      bin = ensureTool("etcd");
    } finally {
      if (saved !== undefined) process.env.ETCD_BIN = saved;
    }
  }
  const reported = binaryRelease(bin);
  if (!reported) throw new Error(`${bin} does not run or does not say its version ('${bin} --version')`);
  if (!reported.startsWith(`${pin.minor}.`)) {
    throw new Error(`${bin} is etcd ${reported}, not ${pin.minor}: etcd ${pin.minor} is Debian's ${pin.package} package (${pin.release})`);
  }
  const etcdctl = join(dirname(bin), "etcdctl");
  if (!executable(etcdctl)) {
    if (process.getuid?.() === 0) {
      process.stderr.write(`[etcd] ${etcdctl} not found: installing Debian package ${pin.client}…\n`);
      const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
      const stdio = ["ignore", process.stderr, process.stderr];
      execFileSync("apt-get", ["update", "-qq"], { stdio, env });
      execFileSync("apt-get", ["install", "-y", "-qq", pin.client], { stdio, env });
    } else {
      process.stderr.write(`[etcd] no etcdctl beside ${bin}: 'sudo apt-get install -y ${pin.client}' adds it\n`);
    }
  }
  return bin;
}

// --- 3.5+: Go modules ----------------------------------------------------------------------------

const ETCD_MAIN = `// etcd, built from its Go module by scripts/etcd.mjs.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
`;

const ETCDCTL_MAIN = `// etcdctl (v3 API), built from its Go module by scripts/etcd.mjs.
package main

import "go.etcd.io/etcd/etcdctl/v3/ctlv3"

func main() { ctlv3.MustStart() }
`;

async function buildFromModules(pin, log) {
  const go = findGo();
  if (!go) {
    throw new Error(
      `etcd ${pin.release} is built from its Go modules, and no 'go' was found (PATH, $GO, /usr/local/go/bin): install Go (the pinned releases' dependencies need Go 1.26 or newer)`,
    );
  }
  const cache = etcdCacheDir();
  const final = join(cache, pin.release);
  return buildOnce({
    cache,
    key: pin.release,
    what: `etcd ${pin.release}`,
    tag: "etcd",
    log,
    built: () => cachedEtcdPath(pin.minor),
    make: async (work) => {
      const src = join(work, "src");
      mkdirSync(join(src, "etcd"), { recursive: true });
      mkdirSync(join(src, "etcdctl"), { recursive: true });
      writeFileSync(join(src, "go.mod"), `module etcd-join-broker/etcd-build\n\ngo 1.23\n`);
      writeFileSync(join(src, "etcd", "main.go"), ETCD_MAIN);
      writeFileSync(join(src, "etcdctl", "main.go"), ETCDCTL_MAIN);
      const env = goBuildEnv();
      const v = `v${pin.release}`;
      const started = Date.now();
      log(`[etcd] building etcd ${pin.release} from its Go modules into ${final} (once per machine; a few minutes when Go's caches are cold)`);
      await run(go, ["get", `go.etcd.io/etcd/server/v3/etcdmain@${v}`, `go.etcd.io/etcd/etcdctl/v3/ctlv3@${v}`], {
        cwd: src,
        env,
        label: `fetching etcd ${pin.release}'s modules`,
        log,
        tag: "etcd",
      });
      const ldflags = `-X go.etcd.io/etcd/api/v3/version.GitSHA=module-${v}`;
      await run(go, ["build", "-ldflags", ldflags, "-o", `${work}/`, "./etcd", "./etcdctl"], {
        cwd: src,
        env,
        label: `compiling etcd ${pin.release}`,
        log,
        tag: "etcd",
      });
      const reported = binaryRelease(join(work, "etcd"));
      if (reported !== pin.release) throw new Error(`the etcd just built says it is ${reported ?? "nothing (it does not run)"}, not ${pin.release}`);
      if (!executable(join(work, "etcdctl"))) throw new Error(`go build made no etcdctl for ${pin.release}`);
      writeBuildRecord(join(work, "build.json"), go, started, { release: pin.release });
      try {
        renameSync(work, final);
      } catch (e) {
        // Someone built it without our lock (a stale lock taken over twice): theirs is as good as ours.
        if (!cachedEtcdPath(pin.minor)) throw e;
      }
      return join(final, "etcd");
    },
  });
}

// --- command line --------------------------------------------------------------------------------

const USAGE = `usage: node scripts/etcd.mjs path VERSION | list [--no-build]

  path VERSION      print the absolute path of etcd VERSION (${ETCD_MINORS.join(", ")}), building or
                    installing it first if needed; etcdctl is in the same directory
  list              every version with its exact release and path (builds what is missing)
  list --no-build   the same, without building ("not built" for what is missing)

Built releases live in ${etcdCacheDir()} (set JOIN_BROKER_ETCD_CACHE to move them).
Pinned releases: scripts/etcd-versions.json.`;

async function main(argv) {
  const [cmd, ...rest] = argv;
  if (!cmd || cmd === "--help" || cmd === "-h" || cmd === "help") {
    (cmd ? process.stdout : process.stderr).write(`${USAGE}\n`);
    return cmd ? 0 : 1;
  }
  if (cmd === "path") {
    if (rest.length !== 1) throw new Error(`'path' takes one VERSION (${ETCD_MINORS.join(", ")})\n\n${USAGE}`);
    process.stdout.write(`${await ensureEtcd(rest[0])}\n`);
    return 0;
  }
  if (cmd === "list") {
    const unknown = rest.filter((a) => a !== "--no-build");
    if (unknown.length) throw new Error(`unknown argument ${unknown[0]}\n\n${USAGE}`);
    const rows = await listEtcd({ build: !rest.includes("--no-build") });
    for (const r of rows) {
      const where = r.path ?? (r.error ? `unavailable: ${r.error.split("\n")[0]}` : "not built");
      const from = r.source === "debian" ? `Debian ${r.package}` : "Go modules";
      process.stdout.write(`${r.minor}\t${r.reported ?? r.release}\t${where}\t(${from})\n`);
    }
    return rows.some((r) => r.error) ? 1 : 0;
  }
  throw new Error(`unknown command '${cmd}'\n\n${USAGE}`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      process.stderr.write(`etcd.mjs: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exit(1);
    },
  );
}
