/**
 * The k0s campaign's schedules (test/lab/campaign-k0s.ts) are a pure function of the seed and stay
 * inside its documented bounds; odd seeds run k0s 1.28 and even ones 1.36; its record is a section
 * of RELIABILITY.md that the main record and it each rewrite without touching the other's.
 */
import { describe, expect, it } from "vitest";
import { K0S_BOUNDS, K0S_OTHER_HOSTS, k0sSchedule, k0sVersionOf } from "../lab/campaign-k0s.ts";
import { faultMix, K0S_TARGET_SEEDS, k0sSectionOf, reliabilityK0sSection, reliabilityMarkdown, withK0sSection } from "../lab/campaign-report.ts";
import type { SeedResult } from "../lab/campaign.ts";
import { K0S_HOSTS } from "../lab/k0s-lab.ts";

describe("k0s campaign schedules", () => {
  it("the same seed gives the same schedule, inside the bounds, on the k0s hosts, the broker and the balancer", () => {
    expect(k0sSchedule(42, K0S_HOSTS)).toEqual(k0sSchedule(42, K0S_HOSTS));
    expect(k0sSchedule(42, K0S_HOSTS)).not.toEqual(k0sSchedule(43, K0S_HOSTS));
    const hosts = new Set<string>();
    for (let seed = 1; seed <= 300; seed++) {
      const faults = k0sSchedule(seed, K0S_HOSTS);
      expect(faults.length).toBeGreaterThanOrEqual(2);
      expect(faults.length).toBeLessThanOrEqual(5);
      for (const f of faults) {
        hosts.add(f.host);
        expect(f.atMs).toBeLessThanOrEqual(K0S_BOUNDS.faultWindowMs);
        if (f.kind === "partition" || f.kind === "loss") expect(f.forMs).toBeLessThanOrEqual(K0S_BOUNDS.maxPartitionMs);
        if (f.kind === "flap") expect(f.forMs).toBeLessThanOrEqual(K0S_BOUNDS.maxFlapMs);
        if (f.kind === "pause") expect(f.forMs).toBeLessThanOrEqual(K0S_BOUNDS.maxPauseMs);
        // Only agents' clocks move (k0s and etcd read the kernel's), and only controllers are frozen, killed or flapped.
        if (f.kind === "skew" || f.kind === "pause" || f.kind === "kill" || f.kind === "flap") expect(K0S_HOSTS).toContain(f.host);
        if (f.kind === "skew") expect(Math.abs(f.seconds)).toBeLessThanOrEqual(K0S_BOUNDS.maxAgentSkewSeconds);
        if (f.kind === "partition") expect(f.from).not.toContain(f.host);
      }
    }
    expect([...hosts].sort()).toEqual([...K0S_HOSTS, ...K0S_OTHER_HOSTS].sort());
  });

  it("odd seeds run k0s 1.28, even seeds 1.36, unless one version is chosen", () => {
    expect([1, 2, 3, 4].map((s) => k0sVersionOf(s, "both"))).toEqual(["1.28", "1.36", "1.28", "1.36"]);
    expect([1, 2].map((s) => k0sVersionOf(s, "1.36"))).toEqual(["1.36", "1.36"]);
  });
});

describe("k0s campaign record", () => {
  const seed = (n: number, installer: string, outcome: "pass" | "fail"): SeedResult => ({
    seed: n,
    mode: "gate",
    installer,
    nodes: K0S_HOSTS,
    schedule: k0sSchedule(n, K0S_HOSTS),
    outcome,
    violations: outcome === "fail" ? [{ invariant: "settles-within-bound", detail: "600 s after healing: k0s-3 lists k0s-1 | k0s-2\nmore" }] : [],
    ends: {},
    durationMs: 240_000,
    timeline: [],
  });
  const run = {
    startedAt: "2026-12-06T10:00:00.000Z",
    etcd: "3.6",
    joiners: 3,
    results: [seed(1, "k0s v1.28.14+k0s.0", "pass"), seed(2, "k0s v1.36.3+k0s.2", "pass"), seed(3, "k0s v1.28.14+k0s.0", "fail")],
  };

  it("has a row per k0s release with its seeds, passes, failures and fault mix, and names the failing seed", () => {
    const section = reliabilityK0sSection(run, "npm run campaign -- --installer k0s --seeds 3 --record");
    const mix128 = Object.entries(faultMix([run.results[0]!, run.results[2]!]))
      .map(([k, n]) => `${k} ${n}`)
      .join(", ");
    expect(section).toContain(`| v1.28.14+k0s.0 | 2 | 1 | 1 | ${mix128} |`);
    expect(section).toMatch(/\| v1\.36\.3\+k0s\.2 \| 1 \| 1 \| 0 \| /);
    expect(section).toContain("`npm run campaign -- --installer k0s --seeds 3 --record`");
    expect(section).toContain("- seed 3 (k0s v1.28.14+k0s.0): settles-within-bound (600 s after healing: k0s-3 lists k0s-1 \\| k0s-2)");
    expect(section).toContain(`**Not yet the target of ${K0S_TARGET_SEEDS} seeds per k0s version**: v1.28.14+k0s.0 has 2, v1.36.3+k0s.2 has 1;`);
  });

  it("says nothing of the target once every version has its seeds", () => {
    const many = Array.from({ length: 2 * K0S_TARGET_SEEDS }, (_, i) => seed(i + 1, i % 2 ? "k0s v1.36.3+k0s.2" : "k0s v1.28.14+k0s.0", "pass"));
    expect(reliabilityK0sSection({ ...run, results: many }, "x")).not.toContain("Not yet the target");
  });

  it("is appended to the record once, replaced when written again, and kept when the main record is written again", () => {
    const main = reliabilityMarkdown(
      { ...run, results: [{ ...seed(9, "", "pass"), installer: undefined, mode: "join-api" }] },
      "npm run campaign -- --seed 9 --record",
    );
    const first = withK0sSection(main, reliabilityK0sSection(run, "first"));
    expect(first.startsWith(main.trimEnd())).toBe(true);
    const again = withK0sSection(first, reliabilityK0sSection({ ...run, results: run.results.slice(0, 1) }, "second"));
    expect(again.match(/## k0s: gate mode around real k0s/g)).toHaveLength(1);
    expect(again).toContain("`second`");
    expect(again).not.toContain("`first`");
    const mainAgain = reliabilityMarkdown(
      { ...run, results: [{ ...seed(10, "", "pass"), installer: undefined, mode: "join-api" }] },
      "npm run campaign -- --seed 10 --record",
    );
    const kept = withK0sSection(mainAgain, k0sSectionOf(again));
    expect(kept).toContain("**1 seed** (10)");
    expect(kept).toContain("`second`");
  });
});
