// `npm run build` (also run by `npm install`, as `prepare`): bundles the CLI (src/node/cli/main.ts
// and everything it imports, dependencies included) into dist/cli with esbuild, split so that
// each command loads only its own code, plus a manifest of the project files it was built from
// (bin/built-cli.mjs checks it before bin/join-broker runs the build). esbuild and workerd stay
// external: both locate their native binaries from their own package directories.
import { build } from "esbuild";
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { BUILD_DIR, ENTRY, MANIFEST, fileHash } from "../bin/built-cli.mjs";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** What every bundle of the CLI shares (this one for dist/cli, scripts/package.mjs's for the single executable file). */
export function cliBundleOptions(root = ROOT) {
  return { absWorkingDir: root, bundle: true, platform: "node", logLevel: "warning", legalComments: "none" };
}

/** Builds into `root/dir` (never half-written: replacing an earlier build file by file, its manifest last); returns the manifest. */
export async function buildCli({ root = ROOT, dir = BUILD_DIR } = {}) {
  const target = join(root, dir);
  const staging = `${target}.tmp-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(dirname(target), { recursive: true });
  const result = await build({
    ...cliBundleOptions(root),
    entryPoints: { main: "src/node/cli/main.ts" },
    outdir: staging,
    splitting: true,
    format: "esm",
    target: "node20",
    external: ["esbuild", "workerd"],
    // Bundled CommonJS dependencies may call require(): give the ES modules one.
    banner: { js: 'import { createRequire as __joinBrokerRequire } from "node:module"; const require = __joinBrokerRequire(import.meta.url);' },
    metafile: true,
    sourcemap: "linked",
  });
  const sources = {};
  for (const input of Object.keys(result.metafile.inputs).sort()) {
    if (input.includes("node_modules/") || input.startsWith("<")) continue;
    sources[input] = fileHash(join(root, input));
  }
  const manifest = { entry: ENTRY, builtAt: new Date().toISOString(), sources };
  writeFileSync(join(staging, MANIFEST), `${JSON.stringify(manifest, null, 1)}\n`);
  if (!existsSync(target)) {
    renameSync(staging, target);
    return manifest;
  }
  // Over an earlier build, file by file (each an atomic rename), its manifest last, then what it
  // no longer has: a CLI started meanwhile (tests run it while `npm pack`'s prepare builds it
  // again) never finds the directory missing, nor a file its own build had (the same sources
  // build the same files).
  const built = readdirSync(staging);
  for (const f of built) if (f !== MANIFEST) renameSync(join(staging, f), join(target, f));
  renameSync(join(staging, MANIFEST), join(target, MANIFEST));
  for (const f of readdirSync(target)) if (!built.includes(f)) rmSync(join(target, f), { recursive: true, force: true });
  rmSync(staging, { recursive: true, force: true });
  return manifest;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const started = Date.now();
  const manifest = await buildCli();
  process.stdout.write(
    `built ${relative(process.cwd(), join(ROOT, BUILD_DIR)) || BUILD_DIR} from ${Object.keys(manifest.sources).length} sources in ${Date.now() - started} ms\n`,
  );
}
