/**
 * A few seeds of the fault campaign (test/lab/campaign.ts, `npm run campaign`): a fixed one and
 * one drawn at random, printed for replay (E2E_SEED, or `npm run campaign -- --seed S --nodes 1+2 --mode M`).
 * Every invariant must hold; a failure names the invariant and the sample that showed it.
 */
import { expect, it } from "vitest";
import { modeOf, runSeed, type JoinMode } from "../lab/campaign.ts";
import { labSkipReason } from "../lab/lab.ts";
import { e2eSeed } from "../support/seeded.ts";

const skip = await labSkipReason();
/** A fixed seed through the join API, and a random one whose parity picks the join mode (even: gate mode). */
const SEEDS: [number, JoinMode][] = [
  [3, "join-api"],
  [e2eSeed("lab-campaign"), "alternate"],
];

for (const [seed, mode] of SEEDS) {
  it.skipIf(skip)(`campaign seed ${seed} (1 + 2 nodes, ${modeOf(seed, mode)}): every invariant holds`, { timeout: 360_000 }, async () => {
    const result = await runSeed(seed, { joiners: 2, mode, log: (line) => console.log(`[campaign] ${line}`) });
    const replay = `replay: npm run campaign -- --seed ${seed} --nodes 1+2 --mode ${result.mode} (timeline ${result.timelinePath})`;
    expect(result.violations, `${JSON.stringify(result.schedule)}\n${replay}`).toEqual([]);
    expect(Object.values(result.ends).every((e) => e.startsWith("joined")), JSON.stringify(result.ends)).toBe(true);
  });
}
