/**
 * Whether etcd's raft ever wrote to a data dir, read from its write-ahead log the way etcd frames
 * it (etcd 3.4–3.7, server/storage/wal): each record is an 8-byte little-endian length (the top
 * byte flags and sizes the padding) followed by a `walpb.Record` whose field 1 is its type.
 *
 * etcd writes a new WAL as a CRC record, its metadata and an empty snapshot record, and only then
 * starts raft, whose first write adds the cluster's initial members (entries) and its term and
 * commit index (state). An etcd killed between the two leaves a WAL with neither: on a restart
 * it takes the data as its own, knows no voter, and never elects a leader.
 * @module
 */
import { closeSync, openSync, readSync, readdirSync } from "node:fs";
import { join } from "node:path";

/** walpb record types (wal/wal.go) a new WAL starts with; raft writes entries (2) and state (3). */
const BEFORE_RAFT = new Set([1 /* metadata */, 4 /* crc */, 5 /* snapshot */]);
/** A new WAL's first records take a few dozen bytes: anything past this is raft's. */
const HEAD_BYTES = 64 * 1024;

/**
 * True unless the data dir's WAL is one file whose records end (a zero frame) before raft wrote
 * any, with no raft snapshot beside it. Anything unexpected counts as written: the caller may
 * only set aside data this says holds nothing.
 */
export function raftWroteData(dataDir: string): boolean {
  const wals = filesEndingIn(join(dataDir, "member", "wal"), ".wal");
  const snaps = filesEndingIn(join(dataDir, "member", "snap"), ".snap");
  if (wals?.length !== 1 || snaps?.length !== 0) return true;
  const head = readHead(join(dataDir, "member", "wal", wals[0]!));
  if (!head) return true;
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  for (let at = 0; at + 8 <= head.length; ) {
    const frame = view.getBigUint64(at, true);
    if (frame === 0n) return false; // the end of what etcd wrote: raft wrote nothing
    const length = Number(frame & 0x00ff_ffff_ffff_ffffn);
    const padding = frame >> 63n ? Number((frame >> 56n) & 7n) : 0;
    const type = recordType(head.subarray(at + 8, at + 8 + length));
    if (type === null || !BEFORE_RAFT.has(type)) return true; // raft's entries or state, or unknown
    at += 8 + length + padding;
  }
  return true;
}

/** The names in `dir` ending in `suffix`; null when it cannot be read (an absent one holds none). */
function filesEndingIn(dir: string, suffix: string): string[] | null {
  try {
    return readdirSync(dir).filter((f) => f.endsWith(suffix));
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "ENOENT" ? [] : null;
  }
}

function readHead(path: string): Uint8Array | null {
  let fd: number | undefined;
  try {
    fd = openSync(path, "r");
    const head = new Uint8Array(HEAD_BYTES);
    return head.subarray(0, readSync(fd, head, 0, HEAD_BYTES, 0));
  } catch {
    return null;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Field 1 (varint) of a protobuf record: its type; null when the bytes do not start with it. */
function recordType(record: Uint8Array): number | null {
  if (record.length < 2 || record[0] !== 0x08) return null;
  let value = 0;
  for (let i = 1, shift = 0; i < record.length && i < 6; i++, shift += 7) {
    value |= (record[i]! & 0x7f) << shift;
    if (!(record[i]! & 0x80)) return value;
  }
  return null;
}
