import { mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { raftWroteData } from "./etcd-wal.ts";

/** The WAL etcd 3.6 left when killed within its first start (test/fixtures/etcd-wal/README.md). */
const CUT = readFileSync(join(import.meta.dirname, "../../../../test/fixtures/etcd-wal/first-start-cut.wal"));
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function dataDir(wal: Uint8Array, extra: (dir: string) => void = () => {}): string {
  const dir = mkdtempSync(join(tmpdir(), "join-broker-wal-"));
  dirs.push(dir);
  mkdirSync(join(dir, "member", "wal"), { recursive: true });
  const file = join(dir, "member", "wal", "0000000000000000-0000000000000000.wal");
  writeFileSync(file, wal);
  truncateSync(file, 1_000_000);
  extra(dir);
  return dir;
}

/** A frame holding a record of `type` with 3 bytes of data, padded to 8 bytes as etcd pads. */
function record(type: number): Uint8Array {
  const body = [0x08, type, 0x1a, 0x01, 0x00];
  const padding = 3;
  const frame = Buffer.alloc(8 + body.length + padding);
  frame.writeBigUInt64LE(BigInt(body.length) | (BigInt(0x80 | padding) << 56n), 0);
  Buffer.from(body).copy(frame, 8);
  return frame;
}

describe("raftWroteData", () => {
  it("is false only for a WAL whose records end before raft wrote one", () => {
    expect(raftWroteData(dataDir(CUT))).toBe(false);
    expect(raftWroteData(dataDir(CUT, (d) => mkdirSync(join(d, "member", "snap"))))).toBe(false);
  });

  it("is true once raft wrote an entry or its state after them", () => {
    expect(raftWroteData(dataDir(Buffer.concat([CUT, record(2)])))).toBe(true);
    expect(raftWroteData(dataDir(Buffer.concat([CUT, record(3)])))).toBe(true);
    // Another record of the kinds a new WAL starts with changes nothing.
    expect(raftWroteData(dataDir(Buffer.concat([CUT, record(4)])))).toBe(false);
  });

  it("is true for whatever it cannot tell: no WAL, two WAL files, a raft snapshot, an unknown record", () => {
    expect(raftWroteData(join(tmpdir(), "join-broker-no-such-dir"))).toBe(true);
    expect(raftWroteData(dataDir(CUT, (d) => writeFileSync(join(d, "member", "wal", "0000000000000001-0000000000000010.wal"), "")))).toBe(true);
    expect(
      raftWroteData(
        dataDir(CUT, (d) => {
          mkdirSync(join(d, "member", "snap"));
          writeFileSync(join(d, "member", "snap", "0000000000000002-0000000000000010.snap"), "x");
        }),
      ),
    ).toBe(true);
    expect(raftWroteData(dataDir(Buffer.concat([CUT, record(9)])))).toBe(true);
    expect(raftWroteData(dataDir(Buffer.from([1, 2, 3, 4, 5, 6, 7, 8, 9])))).toBe(true);
  });
});
