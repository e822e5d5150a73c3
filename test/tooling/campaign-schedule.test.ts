/**
 * The campaign's schedules (test/lab/campaign.ts) are a pure function of the seed: the same seed
 * replays the same faults, every fault stays inside the documented bounds, and the seeds cover
 * every kind of fault. The report's SVG and record render from a result alone.
 */
import { describe, expect, it } from "vitest";
import { BOUNDS, nodeNames, schedule, type SeedResult } from "../lab/campaign.ts";
import { faultMix, reliabilityMarkdown, svgTimeline } from "../lab/campaign-report.ts";
import { k0sSchedule } from "../lab/campaign-k0s.ts";
import { K0S_HOSTS } from "../lab/k0s-lab.ts";

const nodes = nodeNames(3);

describe("campaign schedules", () => {
  it("the same seed gives the same schedule; another seed another one", () => {
    expect(schedule(42, nodes)).toEqual(schedule(42, nodes));
    expect(schedule(42, nodes)).not.toEqual(schedule(43, nodes));
  });

  it("a seed replays the schedule it was recorded with, in both campaigns (one schedule function, each campaign's shape)", () => {
    // Seed 3: a kill the join-API campaign lifts after 529 ms, and that k0s's unit restarts by itself (forMs 0).
    expect(schedule(3, nodes)).toEqual([
      { kind: "flap", atMs: 1546, forMs: 6341, host: "ctrl-0" },
      { kind: "flap", atMs: 19247, forMs: 2843, host: "ctrl-0" },
      { kind: "kill", atMs: 21057, forMs: 529, host: "ctrl-2" },
      { kind: "partition", atMs: 22104, forMs: 10029, host: "ctrl-0", from: ["ctrl-1", "broker"], oneWay: false },
    ]);
    expect(k0sSchedule(3, K0S_HOSTS)).toEqual([
      { kind: "flap", atMs: 5799, forMs: 6341, host: "k0s-1" },
      { kind: "flap", atMs: 72177, forMs: 2843, host: "k0s-1" },
      { kind: "kill", atMs: 78964, forMs: 0, host: "k0s-3" },
      { kind: "partition", atMs: 82891, forMs: 10029, host: "k0s-1", from: ["k0s-2", "broker"], oneWay: false },
    ]);
  });

  it("every fault stays inside the documented bounds", () => {
    for (let seed = 1; seed <= 500; seed++) {
      const faults = schedule(seed, nodes);
      expect(faults.length).toBeGreaterThanOrEqual(2);
      expect(faults.length).toBeLessThanOrEqual(5);
      for (const f of faults) {
        expect(f.atMs).toBeLessThanOrEqual(BOUNDS.faultWindowMs);
        if (f.kind === "partition" || f.kind === "loss") expect(f.forMs).toBeLessThanOrEqual(BOUNDS.maxPartitionMs);
        if (f.kind === "flap") expect(f.forMs).toBeLessThanOrEqual(BOUNDS.maxFlapMs);
        if (f.kind === "pause") expect(f.forMs).toBeLessThanOrEqual(BOUNDS.maxPauseMs);
        if (f.kind === "skew")
          expect(Math.abs(f.seconds)).toBeLessThanOrEqual(f.host === "join-api" ? BOUNDS.maxJoinApiSkewSeconds : BOUNDS.maxAgentSkewSeconds);
        if (f.kind === "partition") {
          expect(f.from.length).toBeGreaterThan(0);
          expect(f.from).not.toContain(f.host);
        }
        if (f.kind === "pause" || f.kind === "kill" || f.kind === "flap") expect(nodes).toContain(f.host);
        if (f.kind === "kill") expect([f.forMs >= 500, f.forMs <= 3_000]).toEqual([true, true]);
      }
      expect(faults.map((f) => f.atMs)).toEqual([...faults.map((f) => f.atMs)].sort((a, b) => a - b));
    }
  });

  it("100 seeds cover every kind of fault, one-way and two-way partitions, and the join API's and the broker's hosts", () => {
    const results = Array.from({ length: 100 }, (_, i) => ({ schedule: schedule(i + 1, nodes) }) as SeedResult);
    expect(Object.keys(faultMix(results))).toEqual([
      "SIGKILL",
      "SIGSTOP pause",
      "clock skew (agent)",
      "clock skew (join API)",
      "link flap",
      "packet loss",
      "partition (one-way)",
      "partition (two-way)",
    ]);
    const hosts = new Set(results.flatMap((r) => r.schedule.flatMap((f) => [f.host, ...(f.kind === "partition" ? f.from : [])])));
    expect(hosts).toContain("broker");
    expect(hosts).toContain("join-api");
  });
});

describe("campaign report", () => {
  const failed: SeedResult = {
    seed: 7,
    mode: "join-api",
    nodes: nodeNames(1),
    schedule: [{ kind: "partition", atMs: 1000, forMs: 5000, host: "ctrl-1", from: ["ctrl-0"], oneWay: false }],
    outcome: "fail",
    violations: [{ invariant: "one-cluster-id", detail: "2 cluster IDs <a & b>" }],
    ends: { "ctrl-0": "joined as bootstrap", "ctrl-1": "exited 4" },
    durationMs: 60_000,
    timeline: [
      {
        t: 1000,
        kind: "fault-partition",
        node: "ctrl-1",
        detail: { kind: "partition", atMs: 1000, forMs: 5000, host: "ctrl-1", from: ["ctrl-0"], oneWay: false },
      },
      { t: 3000, kind: "gave-up", node: "ctrl-1" },
      { t: 7000, kind: "healed" },
    ],
  };

  it("draws hosts as rows, the fault as a bar and the agent's step as a mark, escaping text", () => {
    const svg = svgTimeline(failed);
    expect(svg).toMatch(/^<svg /);
    for (const host of ["ctrl-0", "ctrl-1", "join-api", "broker"]) expect(svg).toContain(`>${host}</text>`);
    expect(svg).toContain("<rect");
    expect(svg).toContain("<circle");
    expect(svg).not.toContain("<a & b>");
  });

  it("the record names the seeds, the outcome, the failing seed's invariant and the command", () => {
    const md = reliabilityMarkdown(
      { startedAt: "2026-12-03T10:00:00.000Z", etcd: "3.6", joiners: 1, results: [failed] },
      "npm run campaign -- --seed 7 --record",
    );
    expect(md).toContain("**1 seed** (7)");
    expect(md).toContain("**0 passed, 1 failed.**");
    expect(md).toContain("seed 7: one-cluster-id");
    expect(md).toContain("`npm run campaign -- --seed 7 --record`");
    expect(md).toContain("| partition (two-way) | 1 |");
  });
});
