import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { DATA_FORMAT, DataDirError, DataDirLocked, lockDataDir, openDataDir, storedAdminToken, VERSION_FILE } from "./data-dir.ts";
import type { DirLock } from "../dir-lock.ts";

const fresh = () => mkdtempSync(join(tmpdir(), "serve-data-"));

describe("the data directory", () => {
  it("is created with its version file, and opened again as it is", () => {
    const dir = join(fresh(), "new");
    const first = openDataDir(dir, "1.0.0", new Date("2026-01-01T00:00:00Z"));
    expect(first.created).toBe(true);
    expect(existsSync(first.storage)).toBe(true);
    const record = JSON.parse(readFileSync(join(dir, VERSION_FILE), "utf8"));
    expect(record).toEqual({ format: DATA_FORMAT, createdBy: "1.0.0", createdAt: "2026-01-01T00:00:00.000Z", writtenBy: "1.0.0" });
    writeFileSync(join(first.storage, "cluster.sqlite"), "data");
    writeFileSync(join(first.run, "stale"), "x");
    const again = openDataDir(dir, "1.1.0");
    expect(again.created).toBe(false);
    expect(readFileSync(join(again.storage, "cluster.sqlite"), "utf8")).toBe("data");
    expect(existsSync(join(again.run, "stale"))).toBe(false);
    expect(JSON.parse(readFileSync(join(dir, VERSION_FILE), "utf8"))).toMatchObject({ createdBy: "1.0.0", writtenBy: "1.1.0" });
  });

  it("refuses a directory written by a newer version, saying which and what to do", () => {
    const dir = fresh();
    writeFileSync(join(dir, VERSION_FILE), JSON.stringify({ format: DATA_FORMAT + 1, createdBy: "9.0.0", writtenBy: "9.0.0" }));
    expect(() => openDataDir(dir, "1.0.0")).toThrow(DataDirError);
    expect(() => openDataDir(dir, "1.0.0")).toThrow(
      `written by join-broker 9.0.0 in data format ${DATA_FORMAT + 1}; this join-broker (1.0.0) reads format ${DATA_FORMAT}`,
    );
    expect(JSON.parse(readFileSync(join(dir, VERSION_FILE), "utf8")).format).toBe(DATA_FORMAT + 1);
  });

  it("refuses a non-empty directory that is not a data directory, and a broken version file", () => {
    const dir = fresh();
    mkdirSync(join(dir, "home"));
    expect(() => openDataDir(dir, "1.0.0")).toThrow(/not a join-broker data directory \(found home\)/);
    const broken = fresh();
    writeFileSync(join(broken, VERSION_FILE), "{");
    expect(() => openDataDir(broken, "1.0.0")).toThrow(/cannot read/);
    writeFileSync(join(broken, VERSION_FILE), "{}");
    expect(() => openDataDir(broken, "1.0.0")).toThrow(/no valid "format"/);
  });

  it("keeps a random admin token when none is given: made once, private, then reused", () => {
    const dir = fresh();
    const made = storedAdminToken(dir);
    expect(made.created).toBe(true);
    expect(made.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(statSync(made.file).mode & 0o777).toBe(0o600);
    expect(storedAdminToken(dir)).toEqual({ ...made, created: false });
    writeFileSync(made.file, "short\n");
    expect(() => storedAdminToken(dir)).toThrow(DataDirError);
    writeFileSync(made.file, "Correct-Horse!Battery#Staple\n");
    expect(() => storedAdminToken(dir)).toThrow(DataDirError);
  });
});

describe("one serve per data directory", () => {
  it("lets exactly one of many claimants take it, and the next one once it is released", () => {
    const dir = join(fresh(), "new");
    const won: DirLock[] = [];
    for (let i = 0; i < 20; i++) {
      try {
        won.push(lockDataDir(dir));
      } catch (e) {
        expect(e).toBeInstanceOf(DataDirLocked);
        expect((e as DataDirLocked).holderPid).toBe(process.pid);
      }
    }
    expect(won).toHaveLength(1);
    // The lock alone does not make the directory someone else's: serve opens it.
    expect(openDataDir(dir, "1.0.0").created).toBe(true);
    won[0]!.unlock();
    lockDataDir(dir).unlock();
  });

  it("never deletes a run/ it did not make: a directory holding one, and no version file, is refused as it is", () => {
    const dir = fresh();
    mkdirSync(join(dir, "run"));
    writeFileSync(join(dir, "run", "theirs"), "x");
    expect(() => openDataDir(dir, "1.0.0")).toThrow(/not a join-broker data directory \(found run\)/);
    expect(readFileSync(join(dir, "run", "theirs"), "utf8")).toBe("x");
    expect(existsSync(join(dir, VERSION_FILE))).toBe(false);
  });
});
