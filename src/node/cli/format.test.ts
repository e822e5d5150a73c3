import { describe, expect, it } from "vitest";
import { duration, inlineDetail, parseDuration, relative, table } from "./format.ts";

describe("admin CLI formatting", () => {
  it("parses --ttl as seconds or unit durations, and nothing else", () => {
    expect(parseDuration("3600")).toBe(3600);
    expect(parseDuration("10m")).toBe(600);
    expect(parseDuration("24h")).toBe(86_400);
    expect(parseDuration("7d")).toBe(604_800);
    expect(parseDuration("1h30m")).toBe(5400);
    for (const bad of ["", "h", "1.5h", "-5", "10 m", "1w", "soon"]) expect(parseDuration(bad)).toBeNull();
  });

  it("writes durations and relative times an operator reads at a glance", () => {
    expect(duration(45)).toBe("45s");
    expect(duration(90)).toBe("1m30s");
    expect(duration(3600)).toBe("1h");
    expect(duration(12_000)).toBe("3h20m");
    expect(duration(190_000)).toBe("2d4h");
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(relative("2026-01-01T00:00:45Z", now)).toBe("in 45s");
    expect(relative("2025-12-31T23:57:00Z", now)).toBe("3m ago");
    expect(relative(undefined, now)).toBeUndefined();
  });

  it("aligns table columns and marks empty cells", () => {
    expect(
      table(
        ["ID", "STATE", "NOTE"],
        [
          ["a", "queued", null],
          ["bbbb", "admitted", "x y"],
        ],
      ),
    ).toBe("ID    STATE     NOTE\na     queued    -\nbbbb  admitted  x y\n");
  });

  it("renders audit details as k=v, quoting strings with spaces", () => {
    expect(inlineDetail({ node: "n1", reason: "disk died", n: 2, gone: null, list: ["a"] })).toBe('node=n1 reason="disk died" n=2 list=["a"]');
    // Member IDs as etcdctl prints them.
    expect(inlineDetail({ node: "n1", memberID: "10501334649042878790" })).toBe("node=n1 memberID=91bc3c398fb3c146");
  });
});
