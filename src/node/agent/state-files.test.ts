import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { StateDir, hasEtcdData, isAlive, writeFileAtomic, type JoinedMarker } from "./state-files.ts";

const fresh = () => mkdtempSync(join(tmpdir(), "agent-state-"));

describe("state dir", () => {
  it("round-trips the marker and the progress state, leaving no temp files", () => {
    const dir = new StateDir(join(fresh(), "nested", "state"));
    expect(dir.readMarker()).toBeNull();
    const marker: JoinedMarker = { version: 1, cluster: "c", node: "n", peerURL: "http://127.0.0.1:2380", role: "join", memberID: "1", clusterID: "a", ticket: "tkt_a", joinedAt: "2026-01-01T00:00:00.000Z" };
    dir.writeMarker(marker);
    expect(dir.readMarker()).toEqual(marker);
    dir.writeState({ version: 1, cluster: "c", node: "n", peerURL: "http://127.0.0.1:2380", ticket: "tkt_a", updatedAt: "" });
    expect(dir.readState()).toMatchObject({ ticket: "tkt_a" });
    expect(readdirSync(dir.path).filter((f) => f.endsWith(".tmp"))).toEqual([]);
  });

  it("refuses a marker it cannot read instead of guessing", () => {
    const dir = new StateDir(fresh());
    writeFileSync(dir.markerPath, "{half");
    expect(() => dir.readMarker()).toThrow(/not valid JSON/);
  });

  it("replaces files atomically", () => {
    const path = join(fresh(), "f");
    writeFileAtomic(path, "one");
    writeFileAtomic(path, "two");
    expect(readdirSync(join(path, "..")).sort()).toEqual(["f"]);
  });

  it("sees etcd data only once etcd wrote its WAL", () => {
    const data = fresh();
    expect(hasEtcdData(data)).toBe(false);
    mkdirSync(join(data, "member", "wal"), { recursive: true });
    expect(hasEtcdData(data)).toBe(false);
    writeFileSync(join(data, "member", "wal", "0000000000000000-0000000000000000.wal"), "");
    expect(hasEtcdData(data)).toBe(true);
  });

  it("tells live from dead processes", async () => {
    const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    await new Promise((r) => child.once("exit", r));
    expect(isAlive(child.pid!)).toBe(false);
    expect(isAlive(process.pid)).toBe(true);
  });

});
