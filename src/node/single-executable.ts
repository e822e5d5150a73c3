/**
 * The node-side commands also ship as one executable file per platform (Node's single executable
 * applications, built by scripts/package.mjs): no package tree beside it, so what the code would
 * read from the package (its package.json) is an asset inside the file.
 * @module
 */
import { getAsset, isSea } from "node:sea";

/** The asset that holds the package's package.json inside the single executable file. */
export const PACKAGE_JSON_ASSET = "package.json";

/** Whether this process is the single executable file rather than Node running the package. */
export function inSingleExecutable(): boolean {
  return isSea();
}

/** The package.json embedded in the single executable file. */
export function embeddedPackageJson(): { name: string; version: string } {
  return JSON.parse(getAsset(PACKAGE_JSON_ASSET, "utf8")) as { name: string; version: string };
}
