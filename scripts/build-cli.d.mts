export const ROOT: string;
export interface BuildManifest {
  entry: string;
  builtAt: string;
  /** Project file (relative to the root) → SHA-256 of its contents when built. */
  sources: Record<string, string>;
}
/** Bundles the CLI into `root/dir` (default dist/cli), replacing an earlier build at once. */
export function buildCli(options?: { root?: string; dir?: string }): Promise<BuildManifest>;
/** The esbuild options every bundle of the CLI shares. */
export function cliBundleOptions(root?: string): Record<string, unknown>;
