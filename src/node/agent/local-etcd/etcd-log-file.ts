/**
 * Reading `<state-dir>/etcd.log`, which the supervised etcd writes to directly: what it wrote
 * since a start, its tail, what is new since the last look, and rotating it when it grows large.
 * @module
 */
import { closeSync, existsSync, fstatSync, openSync, readSync, renameSync, statSync } from "node:fs";

const MAX_LOG_BYTES = 64 * 1024 * 1024;
/** How much of the log written since the last start is read when etcd exits (for its words, and its error). */
const SCAN_BYTES = 256 * 1024;

/** The log from the byte `read` picks (given its size) to its end, as text; nothing when there is no log. */
function readRange(path: string, read: (size: number) => number): { text: string; from: number; size: number } {
  if (!existsSync(path)) return { text: "", from: 0, size: 0 };
  const fd = openSync(path, "r");
  try {
    const size = fstatSync(fd).size;
    const from = read(size);
    if (size <= from) return { text: "", from, size };
    const buf = Buffer.alloc(size - from);
    readSync(fd, buf, 0, buf.length, from);
    return { text: buf.toString("utf8"), from, size };
  } finally {
    closeSync(fd);
  }
}

/**
 * What the log holds from byte `offset` on (at most SCAN_BYTES, the newest), and where it ends:
 * for reading it as it grows. A log rotated meanwhile is read from its start.
 */
export function readLogFrom(path: string, offset: number): { text: string; end: number } {
  const { text, from, size } = readRange(path, (size) => (size < offset ? 0 : Math.max(offset, size - SCAN_BYTES)));
  if (size <= from) return { text: "", end: size };
  // Up to the last complete line: the rest is read next time.
  const lastNewline = text.lastIndexOf("\n");
  return lastNewline < 0 ? { text: "", end: from } : { text: text.slice(0, lastNewline + 1), end: from + Buffer.byteLength(text.slice(0, lastNewline + 1)) };
}

/** The last `bytes` of the log. */
export function readLogTail(path: string, bytes: number): string {
  return readRange(path, (size) => size - Math.min(bytes, size)).text;
}

/** What was written since byte `start` (up to the last SCAN_BYTES of it). */
export function readLogSince(path: string, start: number): string {
  return readRange(path, (size) => Math.max(start, size - SCAN_BYTES)).text;
}

/** Moves a log past MAX_LOG_BYTES to `<path>.1`. */
export function rotateLog(path: string): void {
  try {
    if (statSync(path).size > MAX_LOG_BYTES) renameSync(path, `${path}.1`);
  } catch {
    /* no log yet */
  }
}
