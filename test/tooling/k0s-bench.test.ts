/**
 * The k0s benchmark's pure parts, without a lab: its summary (a failed round is not timed; the
 * ratios are to the serial script's median, per k0s version) and its rows in BENCHMARKS.md's
 * summary table.
 */
import { describe, expect, it } from "vitest";
import { summarizeK0s, type K0sArm, type K0sArmRun, type K0sBenchVersion } from "../../bench/k0s-gate.ts";
import { k0sSummaryRows } from "../../bench/k0s-report.ts";
import type { Results } from "../../bench/results.ts";

const run = (version: K0sBenchVersion, arm: K0sArm, round: number, seconds: number | null): K0sArmRun => ({
  version,
  release: version === "1.28" ? "v1.28.14+k0s.0" : "v1.36.3+k0s.2",
  arm,
  round,
  ok: seconds !== null,
  ...(seconds !== null ? { seconds } : { failure: "3 started voters in the worst view" }),
  nodes: [],
  checks: { voters: seconds !== null ? 4 : 3, clusterIds: 1, learners: 0, restarts: 0 },
});

describe("summarizeK0s", () => {
  const runs = [
    run("1.28", "serial", 0, 40),
    run("1.28", "gate", 0, 50),
    run("1.28", "gate-checked", 0, null),
    run("1.28", "serial", 1, 30),
    run("1.28", "gate", 1, null),
    run("1.28", "gate-checked", 1, 45),
    run("1.28", "serial", 2, 35),
    run("1.28", "gate", 2, 40),
    run("1.28", "gate-checked", 2, 60),
    run("1.36", "serial", 0, 100),
    run("1.36", "gate", 0, 60),
  ];

  it("takes medians per version over the passed rounds only and divides by that version's serial script", () => {
    const [v128, v136] = summarizeK0s(runs, ["1.28", "1.36"]);
    expect(v128).toMatchObject({
      version: "1.28",
      release: "v1.28.14+k0s.0",
      medians: { serial: 35, gate: 45, "gate-checked": 52.5 },
      gateRatio: 1.286,
      checkedRatio: 1.5,
      failedRounds: 2,
    });
    expect(v136).toMatchObject({
      version: "1.36",
      medians: { serial: 100, gate: 60, "gate-checked": null },
      gateRatio: 0.6,
      checkedRatio: null,
      failedRounds: 0,
    });
  });

  it("gives the summary table a row per version and arm that ran, met only at or under the target", () => {
    const k0s = { rounds: 3, runs, summary: summarizeK0s(runs, ["1.28", "1.36"]), notRun: [] };
    const rows = k0sSummaryRows({ k0s, errors: {} } as unknown as Results);
    expect(rows.map((r) => [r[1], r[2], r[4], r[6]])).toEqual([
      ["k0s v1.28.14+k0s.0 through the gate, 1 + 3", "45.0 s", "1.29", "**no**"],
      ["k0s v1.28.14+k0s.0 +broker (checks the admission) through the gate, 1 + 3", "52.5 s", "1.50", "**no**"],
      ["k0s v1.36.3+k0s.2 through the gate, 1 + 3", "60.0 s", "0.60", "yes"],
    ]);
  });

  it("says why the k0s rows are empty when the benchmark did not run", () => {
    expect(k0sSummaryRows({ errors: {}, skipped: { k0s: "not root" } } as unknown as Results)[0]![2]).toBe("skipped");
    expect(k0sSummaryRows({ errors: {} } as unknown as Results)[0]![2]).toBe("not measured");
  });
});
