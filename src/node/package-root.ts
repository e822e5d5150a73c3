/**
 * The package's root directory (where its package.json is), found from the calling module's
 * directory: the same answer from the TypeScript sources (src/node/…) and from the built CLI
 * (dist/cli/), whose files sit at a different depth.
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { embeddedPackageJson, inSingleExecutable } from "./single-executable.ts";

const PACKAGE_NAME = "etcd-join-broker";

export function packageRoot(from: string = import.meta.dirname): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name === PACKAGE_NAME) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json of ${PACKAGE_NAME} above ${from}`);
  }
}

/** The package's version, from its package.json (inside the single executable file, its embedded copy). */
export function packageVersion(): string {
  if (inSingleExecutable()) return embeddedPackageJson().version;
  return (JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8")) as { version: string }).version;
}
