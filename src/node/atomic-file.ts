/**
 * Files that readers see whole: the old content or the new, never a mix, even across a crash.
 * @module
 */
import { closeSync, fsyncSync, openSync, renameSync, writeSync } from "node:fs";
import { dirname } from "node:path";

/**
 * Replaces `path` with `content` so that readers see the old or the new file, never a mix.
 * `rename` is a seam: tests crash there to see what a crash before the rename leaves.
 */
export function writeFileAtomic(path: string, content: string | Uint8Array, rename: (from: string, to: string) => void = renameSync): void {
  const tmp = `${path}.${process.pid}.tmp`;
  const fd = openSync(tmp, "w", 0o600);
  try {
    if (typeof content === "string") writeSync(fd, content);
    else writeSync(fd, content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  rename(tmp, path);
  try {
    const dir = openSync(dirname(path), "r");
    try {
      fsyncSync(dir);
    } finally {
      closeSync(dir);
    }
  } catch {
    /* directories cannot be fsynced on every platform; the rename is still atomic */
  }
}
