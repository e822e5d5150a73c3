#!/usr/bin/env node
// The k0s releases the k0s tests and demo run (scripts/k0s-versions.json), built from the source
// archives in shared/k0s/ (k0s is not served by the Go module proxy; its dependencies are).
//
//   node scripts/k0s.mjs path 1.28|1.36           absolute path of that release's k0s, building it first if needed
//   node scripts/k0s.mjs path 1.28+broker         the same release with the patches of integrations/k0s/1.28/ applied
//   node scripts/k0s.mjs list [VERSION…] [--no-build]  every release (or those named) and its patched variants, with their paths
//
// Each build: the archive's sha256 checked against the pin, unpacked into a scratch directory of
// the cache, the pin's fixes applied (go.mod replaces for modules the proxy refuses at the tagged
// version, go-bindata's generated assets, the empty embedded-binaries table of k0s's Makefile),
// then `go build` of main.go as k0s's Makefile does, with its version ldflags and no embedded
// binaries: k0s then runs the etcd and kube-apiserver found in <data-dir>/bin or on its PATH.
// Once per machine, into $JOIN_BROKER_K0S_CACHE (default ~/.cache/etcd-join-broker/k0s/<release>/),
// under a lock per release, the binary appearing by an atomic rename. Progress goes to stderr,
// the answer to stdout; a failure's reason goes to stderr with exit code 1, a wrong command line
// exits 2.
//
// Patched variants (`<version>+<variant>`): every `*.patch` in integrations/k0s/<version>/<variant>/
// is applied in name order (`patch -p1`, paths relative to the k0s source tree) before building,
// and the k0s module gets a replace of this repository's Go module (integrations/go) by its
// directory here, so a patch may import github.com/etcd-join-broker/etcd-join-broker/integrations/go/...
// A variant's build is cached under <release>+<variant>-<hash>, the hash covering its patches and
// integrations/go, so changing either builds anew. Only variants with such a directory exist.
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { createReadStream, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { buildOnce, goBuildEnv, projectCacheDir, run, writeBuildRecord } from "./build-cache.mjs";
import { executable, findGo } from "./tools.mjs";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const PINS = JSON.parse(readFileSync(new URL("./k0s-versions.json", import.meta.url), "utf8"));

/** The k0s minor versions pinned, oldest first: ["1.28", "1.36"]. */
export const K0S_VERSIONS = Object.keys(PINS).filter((k) => /^\d+\.\d+$/.test(k));

/** The Go module of this repository's Go code, which a patched variant may import. */
export const PROJECT_GO_MODULE = "github.com/etcd-join-broker/etcd-join-broker/integrations/go";

/** A command line this script does not accept (exit 2 with the usage). */
export class UsageError extends Error {
  code = "usage";
}

/**
 * "1.28", "v1.28.14+k0s.0" (the pinned release), either with "+<variant>" → `{ version, variant }`
 * (variant null for the release as tagged). Throws with the choices for anything else.
 */
export function parseK0sVersion(text) {
  const raw = String(text ?? "").trim();
  const m = /^v?(\d+\.\d+)(\.\d+\+k0s\.\d+)?(?:\+([a-z][a-z0-9-]*))?$/.exec(raw);
  const version = m?.[1];
  // A full release must be the pinned one: "1.28.13+k0s.0" is not built here.
  if (!m || !PINS[version] || (m[2] && `v${version}${m[2]}` !== PINS[version].release)) {
    const known = K0S_VERSIONS.map((k) => `${k} (${PINS[k].release})`).join(", ");
    throw new UsageError(`unknown k0s version '${raw}': choose one of ${known}, optionally with +<variant> (a directory of integrations/k0s/<version>/)`);
  }
  return { version, variant: m[3] ?? null };
}

/** What is pinned for one minor version (scripts/k0s-versions.json), with `version`. */
export function k0sPin(version) {
  const { version: v } = parseK0sVersion(version);
  return { version: v, ...PINS[v] };
}

/** Where built releases live: $JOIN_BROKER_K0S_CACHE, else $XDG_CACHE_HOME or ~/.cache, under etcd-join-broker/k0s. */
export function k0sCacheDir() {
  if (process.env.JOIN_BROKER_K0S_CACHE) return resolve(process.env.JOIN_BROKER_K0S_CACHE);
  return join(projectCacheDir(), "k0s");
}

/** Where the development machines keep the archives, for a checkout that is not beside them (a clean clone in /tmp, say). */
const MACHINE_SOURCE_DIR = "/work/shared/k0s";

/**
 * The directory holding the k0s source archives: $JOIN_BROKER_K0S_SOURCE, else the first
 * `shared/k0s` beside this checkout or one of its parents (a checkout at /work/main or
 * /work/wt/<name> finds /work/shared/k0s), else the machine's /work/shared/k0s. Null when there
 * is none.
 */
export function k0sSourceDir() {
  if (process.env.JOIN_BROKER_K0S_SOURCE) return resolve(process.env.JOIN_BROKER_K0S_SOURCE);
  for (let dir = ROOT; ; dir = dirname(dir)) {
    const candidate = join(dirname(dir), "shared", "k0s");
    if (existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) break;
  }
  return existsSync(MACHINE_SOURCE_DIR) ? MACHINE_SOURCE_DIR : null;
}

/** The patch directory of a variant: integrations/k0s/<version>/<variant>/. */
export function variantDir(version, variant) {
  return join(ROOT, "integrations", "k0s", version, variant);
}

/** The variants with a patch directory for this version (names of integrations/k0s/<version>/*). */
export function k0sVariants(version) {
  const dir = join(ROOT, "integrations", "k0s", version);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => /^[a-z][a-z0-9-]*$/.test(f) && statSync(join(dir, f)).isDirectory())
    .sort();
}

function filesUnder(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(path));
    else if (entry.isFile()) out.push(path);
  }
  return out.sort();
}

/** The patches a variant applies, in order: every *.patch of its directory, sorted by name. */
export function variantPatches(version, variant) {
  const dir = variantDir(version, variant);
  if (!existsSync(dir)) {
    const known = k0sVariants(version);
    throw new UsageError(
      `k0s ${version} has no variant '${variant}': it would be the patches of ${relative(ROOT, dir)}/ (${known.length ? `variants: ${known.join(", ")}` : "no variant exists yet"})`,
    );
  }
  const patches = readdirSync(dir)
    .filter((f) => f.endsWith(".patch"))
    .sort()
    .map((f) => join(dir, f));
  if (patches.length === 0) throw new Error(`${relative(ROOT, dir)}/ holds no *.patch file`);
  return patches;
}

/** The cache key of a build: the release, or `<release>+<variant>-<12 hex>` (its patches and integrations/go hashed). */
export function buildKey(version, variant) {
  const pin = k0sPin(version);
  if (!variant) return pin.release;
  const hash = createHash("sha256");
  for (const file of [...filesUnder(variantDir(version, variant)), ...filesUnder(join(ROOT, "integrations", "go"))]) {
    hash.update(relative(ROOT, file)).update("\0").update(readFileSync(file)).update("\0");
  }
  return `${pin.release}+${variant}-${hash.digest("hex").slice(0, 12)}`;
}

/**
 * The `name = value` assignments of a Makefile.variables (comments dropped, `+=` ignored): k0s's
 * embedded-bins/Makefile.variables, where the versions its ldflags name are pinned.
 */
export function makeVariables(text) {
  const vars = {};
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*$/, "");
    const m = /^\s*([A-Za-z_][A-Za-z0-9_-]*)\s*[:?]?=\s*(.*?)\s*$/.exec(line);
    if (m && !/\+=/.test(line)) vars[m[1]] = m[2].replace(/^"(.*)"$/, "$1");
  }
  return vars;
}

/**
 * The linker flags of k0s's Makefile for a release: its own version, the component versions of
 * embedded-bins/Makefile.variables (k0s reports them, and picks behaviour by some), Kubernetes'
 * version variables, stripped. `buildDate` is the tagged commit's time (reproducible builds).
 */
export function k0sLdflags(release, variables, buildDate) {
  const v = (name) => {
    const value = variables[`${name}_version`];
    // 1.36 pins containerd as "<version>@<revision>" and derives containerd_version with make functions.
    if (name === "containerd" && (!value || value.includes("$("))) return (variables.containerd_version_and_rev ?? "").split("@")[0];
    return value ?? "";
  };
  const kube = v("kubernetes");
  const [major, minor] = kube.split(".");
  const flags = ["-w", "-s", `-X github.com/k0sproject/k0s/pkg/build.Version=${release}`];
  for (const [name, component] of [
    ["RuncVersion", "runc"],
    ["ContainerdVersion", "containerd"],
    ["KubernetesVersion", "kubernetes"],
    ["KineVersion", "kine"],
    ["EtcdVersion", "etcd"],
    ["KonnectivityVersion", "konnectivity"],
  ]) {
    flags.push(`-X github.com/k0sproject/k0s/pkg/build.${name}=${v(component)}`);
  }
  flags.push(
    `-X k8s.io/component-base/version.gitVersion=v${kube}`,
    `-X k8s.io/component-base/version.gitMajor=${major}`,
    `-X k8s.io/component-base/version.gitMinor=${minor}`,
    `-X k8s.io/component-base/version.buildDate=${buildDate}`,
    "-X k8s.io/component-base/version.gitCommit=not_available",
  );
  return flags.join(" ");
}

/** What `k0s version` says ("v1.28.14+k0s.0"), or null when it does not run. */
export function reportedK0sVersion(bin) {
  try {
    return execFileSync(bin, ["version"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 20_000 }).trim() || null;
  } catch {
    return null;
  }
}

/** The path of an already-built k0s of this version (and variant), or null (never builds). */
export function cachedK0sPath(version) {
  const { version: v, variant } = parseK0sVersion(version);
  if (variant) variantPatches(v, variant); // an unknown variant is an error, not "not built"
  const bin = join(k0sCacheDir(), buildKey(v, variant), "k0s");
  return executable(bin) ? bin : null;
}

/** The absolute path of this version's k0s ("1.28", "1.36", "1.28+broker"), built first if needed. */
export async function ensureK0s(version, { log = (line) => process.stderr.write(`${line}\n`) } = {}) {
  return cachedK0sPath(version) ?? build(parseK0sVersion(version), log);
}

/** Every pinned release (or those of `versions`) and its variants: `{ name, release, path | null, reported, error }`. */
export async function listK0s({ build = true, log, versions = K0S_VERSIONS } = {}) {
  const out = [];
  for (const version of versions) {
    for (const name of [version, ...k0sVariants(version).map((variant) => `${version}+${variant}`)]) {
      let path = null;
      let error = null;
      try {
        path = build ? await ensureK0s(name, { log }) : cachedK0sPath(name);
      } catch (e) {
        error = e instanceof Error ? e.message : String(e);
      }
      out.push({ name, release: PINS[version].release, path, reported: path ? reportedK0sVersion(path) : null, error });
    }
  }
  return out;
}

/** The sha256 of a file, hex. */
export function sha256File(path) {
  return new Promise((ok, fail) => {
    const hash = createHash("sha256");
    createReadStream(path)
      .on("data", (chunk) => hash.update(chunk))
      .on("error", fail)
      .on("end", () => ok(hash.digest("hex")));
  });
}

/** The archive of a pin, its sha256 checked; throws saying where it was looked for or what it hashed to. */
export async function checkedArchive(pin) {
  const dir = k0sSourceDir();
  if (!dir)
    throw new Error(
      `k0s ${pin.release} is built from its source archive ${pin.archive}, and no directory shared/k0s was found beside ${ROOT} or its parents: set JOIN_BROKER_K0S_SOURCE to the directory holding it`,
    );
  const archive = join(dir, pin.archive);
  if (!existsSync(archive))
    throw new Error(`k0s ${pin.release}'s source archive is missing: ${archive} (set JOIN_BROKER_K0S_SOURCE to the directory holding ${pin.archive})`);
  const actual = await sha256File(archive);
  if (actual !== pin.sha256)
    throw new Error(
      `${archive} has sha256 ${actual}, not the pinned ${pin.sha256} (scripts/k0s-versions.json): it is not k0s ${pin.release} as tagged (commit ${pin.commit})`,
    );
  return archive;
}

const OFFSETS_GO = `package assets

var BinData = map[string]struct{ offset, size, originalSize int64 }{}
var BinDataSize int64
`;

async function build({ version, variant }, log) {
  const pin = k0sPin(version);
  const go = findGo();
  if (!go) throw new Error(`k0s ${pin.release} is built with Go, and no 'go' was found (PATH, $GO, /usr/local/go/bin): install Go 1.26 or newer`);
  const patches = variant ? variantPatches(version, variant) : [];
  const key = buildKey(version, variant);
  const name = `k0s ${pin.release}${variant ? ` +${variant}` : ""}`;
  const cache = k0sCacheDir();
  const final = join(cache, key);
  const done = join(final, "k0s");
  return buildOnce({ cache, key, what: name, tag: "k0s", log, built: () => (executable(done) ? done : null), make: (work) => make(work) });

  async function make(work) {
    const started = Date.now();
    log(
      `[k0s] building ${name} from its source archive into ${final} (once per machine; 6 to 10 minutes on 2 cores, and about 1 GB of modules, when Go's caches are cold)`,
    );
    const archive = await checkedArchive(pin);
    log(`[k0s] ${archive}: sha256 ${pin.sha256} as pinned`);
    execFileSync("tar", ["-xzf", archive, "-C", work], { stdio: ["ignore", "ignore", "inherit"] });
    const top = readdirSync(work).filter((f) => f.startsWith("k0s-"));
    if (top.length !== 1) throw new Error(`${archive} does not hold one k0s-<tag>/ folder (found: ${readdirSync(work).join(", ") || "nothing"})`);
    const src = join(work, top[0]);
    const buildDate = new Date(statSync(join(src, "main.go")).mtimeMs).toISOString().replace(/\.\d{3}Z$/, "Z"); // git archive: the commit's time
    const env = goBuildEnv(
      { ...process.env, CGO_ENABLED: pin.cgo ? "1" : "0", ...(pin.cgoCflags ? { CGO_CFLAGS: pin.cgoCflags } : {}) },
      pin.replace || variant ? ["-mod=mod"] : [],
    );
    const step = (args, label, cwd = src) => run(go, args, { cwd, env, label, log, tag: "k0s" });
    // Modules the proxy refuses at the version k0s's go.mod names (403), replaced by the next patch release.
    for (const [module, v] of Object.entries(pin.replace ?? {}))
      await step(["mod", "edit", `-replace=${module}=${module}@${v}`], `replacing ${module} by ${v}`);
    if (pin.goBindata) {
      // `go install …@version` of go-bindata fails on the proxy's version list; a scratch module builds it.
      const tool = join(work, "go-bindata-build");
      mkdirSync(tool);
      writeFileSync(join(tool, "go.mod"), "module etcd-join-broker/go-bindata-build\n\ngo 1.22\n");
      await step(["get", `github.com/kevinburke/go-bindata@${pin.goBindata}`], `fetching go-bindata ${pin.goBindata}`, tool);
      await step(["build", "-o", join(work, "go-bindata"), "github.com/kevinburke/go-bindata/go-bindata"], "compiling go-bindata", tool);
      await run(
        join(work, "go-bindata"),
        ["-o", "static/zz_generated_assets.go", "-pkg", "static", "-prefix", "static", "static/manifests/...", "static/misc/..."],
        { cwd: src, env, label: "generating static/zz_generated_assets.go", log, tag: "k0s" },
      );
    }
    if (pin.emptyOffsets) writeFileSync(join(src, "pkg", "assets", "zz_generated_offsets_linux.go"), OFFSETS_GO);
    if (variant) {
      for (const patch of patches) {
        log(`[k0s] applying ${relative(ROOT, patch)}`);
        execFileSync("patch", ["-p1", "--forward", "--batch", "-i", patch], { cwd: src, stdio: ["ignore", "ignore", "inherit"] });
      }
      await step(["mod", "edit", `-replace=${PROJECT_GO_MODULE}=${join(ROOT, "integrations", "go")}`], `pointing ${PROJECT_GO_MODULE} at this checkout`);
    }
    const variables = makeVariables(readFileSync(join(src, "embedded-bins", "Makefile.variables"), "utf8"));
    const ldflags = k0sLdflags(pin.release, variables, buildDate);
    await step(["build", "-tags=osusergo", "-trimpath", `-ldflags=${ldflags}`, "-o", join(work, "k0s"), "main.go"], `compiling ${name}`);
    const reported = reportedK0sVersion(join(work, "k0s"));
    if (reported !== pin.release) throw new Error(`the k0s just built says it is ${reported ?? "nothing (it does not run)"}, not ${pin.release}`);
    mkdirSync(final, { recursive: true });
    writeBuildRecord(join(final, "k0s.build.json"), go, started, {
      release: pin.release,
      variant,
      patches: patches.map((p) => relative(ROOT, p)),
      commit: pin.commit,
      sha256: pin.sha256,
    });
    renameSync(join(work, "k0s"), done);
    return done;
  }
}

// --- command line --------------------------------------------------------------------------------

function usage() {
  const releases = K0S_VERSIONS.map((v) => `${v} (${PINS[v].release})`).join(", ");
  return `usage: node scripts/k0s.mjs path VERSION[+VARIANT] | list [VERSION…] [--no-build]

  path VERSION      print the absolute path of k0s VERSION (${releases}), building it first
                    if needed from shared/k0s/<archive> (sha256 checked)
  path VERSION+V    the same release with the patches of integrations/k0s/VERSION/V/ applied
  list              every release and variant with its path (builds what is missing)
  list VERSION…     only those releases and their variants (npm test builds each release
                    as a job of its own, so the tests of the first start before the second is built)
  list --no-build   the same, without building ("not built" for what is missing)

k0s runs the etcd and kube-apiserver found in <data-dir>/bin or on its PATH: etcd from
'node scripts/etcd.mjs path ${PINS[K0S_VERSIONS[0]].etcd}' (1.28) or '${PINS[K0S_VERSIONS.at(-1)].etcd}' (1.36), kube-apiserver from
'node scripts/kube.mjs path kube-apiserver'.
Built binaries live in ${k0sCacheDir()} (set JOIN_BROKER_K0S_CACHE to move them);
the archives are looked for in ${k0sSourceDir() ?? "shared/k0s beside this checkout or a parent"} (JOIN_BROKER_K0S_SOURCE).
Pinned releases: scripts/k0s-versions.json.`;
}

async function main(argv) {
  const [cmd, ...rest] = argv;
  if (cmd === "--help" || cmd === "-h" || cmd === "help") {
    process.stdout.write(`${usage()}\n`);
    return 0;
  }
  if (cmd === "path") {
    if (rest.length !== 1) throw new UsageError(`'path' takes one VERSION (${K0S_VERSIONS.join(", ")})`);
    process.stdout.write(`${await ensureK0s(rest[0])}\n`);
    return 0;
  }
  if (cmd === "list") {
    const named = rest.filter((a) => a !== "--no-build");
    const unknown = named.filter((a) => !K0S_VERSIONS.includes(a));
    if (unknown.length) throw new UsageError(`unknown argument ${unknown[0]} (a version is one of ${K0S_VERSIONS.join(", ")})`);
    const rows = await listK0s({ build: !rest.includes("--no-build"), versions: named.length ? [...new Set(named)] : K0S_VERSIONS });
    for (const r of rows) {
      const where = r.path ?? (r.error ? `unavailable: ${r.error.split("\n")[0]}` : "not built");
      process.stdout.write(`${r.name}\t${r.reported ?? r.release}\t${where}\n`);
    }
    return rows.some((r) => r.error) ? 1 : 0;
  }
  throw new UsageError(cmd ? `unknown command '${cmd}'` : "no command");
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e) => {
      if (e instanceof UsageError) {
        process.stderr.write(`k0s.mjs: ${e.message}\n\n${usage()}\n`);
        process.exit(2);
      }
      process.stderr.write(`k0s.mjs: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exit(1);
    },
  );
}
