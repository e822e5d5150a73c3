import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AUTH_FAILURE_LIMIT, FixedWindowLimiter } from "./rate-limit.ts";

const wranglerToml = readFileSync(join(import.meta.dirname, "../../../wrangler.toml"), "utf8");

describe("the local AUTH_FAILURES limiter", () => {
  it("has the limit and period of wrangler.toml's rate-limiting binding", () => {
    const m = /\[\[ratelimits\]\]\s*name = "AUTH_FAILURES"[\s\S]*?simple = \{ limit = (\d+), period = (\d+) \}/.exec(wranglerToml);
    expect(m).not.toBeNull();
    expect({ limit: Number(m![1]), period: Number(m![2]) }).toEqual(AUTH_FAILURE_LIMIT);
  });

  it("allows `limit` calls per key in a window, refuses the next, and starts over in the next window", async () => {
    let now = 60_000 * 1000 + 5_000;
    const limiter = new FixedWindowLimiter(3, 60, () => now);
    const results = [];
    for (let i = 0; i < 4; i++) results.push((await limiter.limit({ key: "10.0.0.1" })).success);
    expect(results).toEqual([true, true, true, false]);
    expect((await limiter.limit({ key: "10.0.0.2" })).success).toBe(true);
    now += 54_999; // still the same 60 s window
    expect((await limiter.limit({ key: "10.0.0.1" })).success).toBe(false);
    now += 1; // the next window
    expect((await limiter.limit({ key: "10.0.0.1" })).success).toBe(true);
  });

  it("forgets expired windows once many keys have been seen", () => {
    let now = 0;
    const limiter = new FixedWindowLimiter(1, 1, () => now);
    for (let i = 0; i < 10_000; i++) limiter.take(`k${i}`);
    expect(limiter.size).toBe(10_000);
    now = 2_000;
    limiter.take("fresh");
    expect(limiter.size).toBe(1);
  });
});
