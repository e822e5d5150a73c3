/**
 * Where the benchmarks live and where they put scratch state (bench/out, not committed).
 * @module
 */
import { mkdirSync } from "node:fs";
import { resolve } from "node:path";

export const ROOT = resolve(import.meta.dirname, "../..");

export function scratchDir(): string {
  const dir = resolve(ROOT, "bench/out");
  mkdirSync(dir, { recursive: true });
  return dir;
}
