/**
 * Files that readers see whole: the old content or the new, never a mix, even across a crash.
 * @module
 */
import { closeSync, fsyncSync, openSync, renameSync, writeSync } from "node:fs";
import { open, rename } from "node:fs/promises";
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

/**
 * Several files, each seen whole, written with their data flushed at once rather than one after
 * another: every file's content is written and fsynced in parallel, then the files are renamed
 * into place group by group, in order, each group's directory fsynced before the next group is
 * renamed. So a file of a later group (a certificate) is never on disk without those of the
 * earlier groups (its key), even across a crash.
 */
export async function writeFilesAtomic(groups: readonly (readonly { path: string; content: string }[])[]): Promise<void> {
  const all = groups.flat();
  const tmp = (path: string) => `${path}.${process.pid}.tmp`;
  await Promise.all(
    all.map(async ({ path, content }) => {
      const file = await open(tmp(path), "w", 0o600);
      try {
        await file.writeFile(content);
        await file.sync();
      } finally {
        await file.close();
      }
    }),
  );
  for (const group of groups) {
    for (const { path } of group) await rename(tmp(path), path);
    for (const dir of new Set(group.map(({ path }) => dirname(path)))) {
      try {
        const handle = await open(dir, "r");
        try {
          await handle.sync();
        } finally {
          await handle.close();
        }
      } catch {
        /* directories cannot be fsynced on every platform; each rename is still atomic */
      }
    }
  }
}
