/**
 * Whether the built CLI (dist/cli, made by `npm run build`, which `npm install` runs) matches
 * the sources it was built from. Its manifest lists a SHA-256 of every project file in the
 * build; a file that changed or went missing means the build is stale and the command runs the
 * TypeScript sources instead, so an edit never runs old code. Contents are hashed, not mtimes
 * compared: npm's tarballs reset every mtime. Plain JavaScript: it runs before any TypeScript
 * loader.
 * @module
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

export const BUILD_DIR = "dist/cli";
export const ENTRY = "main.js";
export const MANIFEST = "manifest.json";

/** SHA-256 (hex) of a file's contents. */
export function fileHash(path) {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

/**
 * The built entry module's path when the build in `root/dir` is complete and every source it
 * lists is unchanged; otherwise null, with the reason in `why` (for JOIN_BROKER_LAUNCH=explain).
 */
export function freshBuild(root, dir = BUILD_DIR) {
  const entry = join(root, dir, ENTRY);
  const manifestPath = join(root, dir, MANIFEST);
  if (!existsSync(entry) || !existsSync(manifestPath)) return { entry: null, why: `no build in ${dir}` };
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
  } catch {
    return { entry: null, why: `${dir}/${MANIFEST} is not JSON` };
  }
  if (!manifest || typeof manifest.sources !== "object" || manifest.sources === null) return { entry: null, why: `${dir}/${MANIFEST} lists no sources` };
  for (const [file, hash] of Object.entries(manifest.sources)) {
    const path = join(root, file);
    if (!existsSync(path)) return { entry: null, why: `${file} is gone since the build` };
    if (fileHash(path) !== hash) return { entry: null, why: `${file} changed since the build` };
  }
  return { entry, why: `built from ${Object.keys(manifest.sources).length} unchanged sources` };
}
