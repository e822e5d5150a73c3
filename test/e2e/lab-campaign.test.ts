/**
 * A few seeds of the fault campaign (test/lab/campaign.ts, `npm run campaign`): a fixed one and
 * one drawn at random, printed for replay (E2E_SEED, or `npm run campaign -- --seed S --nodes 1+2`).
 * Every invariant must hold; a failure names the invariant and the sample that showed it.
 */
import { expect, it } from "vitest";
import { runSeed } from "../lab/campaign.ts";
import { labSkipReason } from "../lab/lab.ts";
import { e2eSeed } from "../support/seeded.ts";

const skip = await labSkipReason();
const SEEDS = [3, e2eSeed("lab-campaign")];

for (const seed of SEEDS) {
  it.skipIf(skip)(`campaign seed ${seed} (1 + 2 nodes): every invariant holds`, { timeout: 360_000 }, async () => {
    const result = await runSeed(seed, { joiners: 2, log: (line) => console.log(`[campaign] ${line}`) });
    const replay = `replay: npm run campaign -- --seed ${seed} --nodes 1+2 (timeline ${result.timelinePath})`;
    expect(result.violations, `${JSON.stringify(result.schedule)}\n${replay}`).toEqual([]);
    expect(Object.values(result.ends).every((e) => e.startsWith("joined")), JSON.stringify(result.ends)).toBe(true);
  });
}
