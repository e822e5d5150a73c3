import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { writeFileAtomic } from "../../atomic-file.ts";
import { StateDir, hasEtcdData, isAlive, type JoinedMarker } from "./state-files.ts";

const fresh = () => mkdtempSync(join(tmpdir(), "agent-state-"));

describe("state dir", () => {
  it("round-trips the marker and the progress state, leaving no temp files", () => {
    const dir = new StateDir(join(fresh(), "nested", "state"));
    expect(dir.readMarker()).toBeNull();
    const marker: JoinedMarker = {
      version: 1,
      cluster: "c",
      node: "n",
      peerURL: "http://127.0.0.1:2380",
      role: "join",
      memberID: "1",
      clusterID: "a",
      ticket: "tkt_a",
      joinedAt: "2026-01-01T00:00:00.000Z",
    };
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

  it("replaces files atomically: a crash before the rename leaves the old content whole", () => {
    const path = join(fresh(), "f");
    writeFileAtomic(path, "one");
    const renames: string[] = [];
    const crash = new Error("crashed before the rename");
    expect(() =>
      writeFileAtomic(path, "two", (from, to) => {
        // The new content is complete and durable in its own file, the old one still in place.
        renames.push(from);
        expect(from).not.toBe(to);
        expect(readFileSync(from, "utf8")).toBe("two");
        expect(readFileSync(to, "utf8")).toBe("one");
        throw crash;
      }),
    ).toThrow(crash);
    expect(renames).toHaveLength(1);
    expect(readFileSync(path, "utf8")).toBe("one");
    writeFileAtomic(path, "three");
    expect(readFileSync(path, "utf8")).toBe("three");
    expect(readdirSync(join(path, "..")).sort()).toEqual(["f"]);
  });

  it("replaces files atomically: a reader in another process never sees a missing, empty or partial file", async () => {
    const dir = fresh();
    const path = join(dir, "f");
    const stop = join(dir, "stop");
    // Large enough that writing it in place takes many reads' time.
    const SIZE = 4 << 20;
    const contents = ["a", "b"].map((c) => c.repeat(SIZE - 1) + "\n");
    writeFileAtomic(path, contents[0]!);
    // Counts reads that found the file missing, or not exactly one of the two contents.
    const readerScript = `
      const fs = require("node:fs");
      const [path, stop] = process.argv.slice(1);
      const whole = ["a", "b"].map((c) => c.repeat(${SIZE - 1}) + "\\n");
      let reads = 0, bad = 0;
      const seen = new Set();
      const report = () => process.stdout.write(reads + " " + bad + " " + [...seen].join("") + "\\n");
      while (!fs.existsSync(stop)) {
        let text = null;
        try { text = fs.readFileSync(path, "latin1"); } catch {}
        reads++;
        if (whole.includes(text)) seen.add(text[0]);
        else bad++;
        if (reads % 10 === 0) report();
      }
      report();`;
    const reader = spawn(process.execPath, ["-e", readerScript, path, stop], { stdio: ["ignore", "pipe", "inherit"] });
    let last = { reads: 0, bad: 0, seen: "" };
    let pending = "";
    reader.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      const lines = (pending + chunk).split("\n");
      pending = lines.pop()!;
      const line = lines.at(-1)?.split(" ");
      if (line) last = { reads: Number(line[0]), bad: Number(line[1]), seen: line[2] ?? "" };
    });
    // "close": its last report read, not only the process gone.
    const exited = new Promise((resolve) => reader.once("close", resolve));
    // Keep replacing the file until the reader has read it many times while that went on.
    const deadline = Date.now() + 60_000;
    let writes = 0;
    while ((last.reads < 300 || writes < 50) && Date.now() < deadline) {
      writeFileAtomic(path, contents[++writes % 2]!);
      await new Promise((resolve) => setImmediate(resolve));
    }
    writeFileSync(stop, "");
    await exited;
    expect(last.reads).toBeGreaterThanOrEqual(300);
    expect(last.bad).toBe(0);
    // It saw both contents: the file did change under it.
    expect([...last.seen].sort().join("")).toBe("ab");
    expect(readFileSync(path, "latin1")).toBe(contents[writes % 2]);
  }, 90_000);

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
