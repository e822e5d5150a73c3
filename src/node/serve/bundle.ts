/**
 * Bundles the self-hosted Worker entry (src/broker/selfhost/worker.ts: the production Worker plus the
 * local rate limiter) into one ES module for workerd, with esbuild, as wrangler would.
 * @module
 */
import { build } from "esbuild";
import { join } from "node:path";

import { packageRoot } from "../package-root.ts";

/** The Worker's source: the package ships src/ beside the built CLI. */
export const WORKER_ENTRY = join(packageRoot(), "src/broker/selfhost/worker.ts");

export async function bundleWorker(outfile: string, entry = WORKER_ENTRY): Promise<void> {
  await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2024",
    mainFields: ["module", "main"],
    conditions: ["workerd", "worker", "browser"],
    external: ["cloudflare:*"],
    sourcemap: false,
    logLevel: "silent",
    legalComments: "none",
  });
}
