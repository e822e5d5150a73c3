import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AUTH_FAILURE_LIMIT, FixedWindowLimiter } from "./rate-limit.ts";
import { selfHosted } from "./wrap.ts";

const read = (path: string) => readFileSync(join(import.meta.dirname, "../../..", path), "utf8");

/** The limit every reader is told: 20 failed authentications per address in 60 s. */
const DOCUMENTED = { limit: 20, period: 60 };

/** The AUTH_FAILURES binding the self-hosted wrapper hands the Worker, on a clock of our own. */
function selfHostedLimiter(now: () => number): RateLimit {
  let seen: Env | undefined;
  const worker = selfHosted({ fetch: async (_request, env) => ((seen = env), new Response()) }, now);
  void worker.fetch!(new Request("http://broker.test/"), {} as Env, {} as ExecutionContext);
  return seen!.AUTH_FAILURES;
}

describe("the failed-authentication limit", () => {
  it("is the documented 20 per 60 s, in wrangler.toml's binding, the code and docs/security.md", () => {
    const m = /\[\[ratelimits\]\]\s*name = "AUTH_FAILURES"[\s\S]*?simple = \{ limit = (\d+), period = (\d+) \}/.exec(read("wrangler.toml"));
    expect(m).not.toBeNull();
    expect({ limit: Number(m![1]), period: Number(m![2]) }).toEqual(DOCUMENTED);
    expect(AUTH_FAILURE_LIMIT).toEqual(DOCUMENTED);
    expect(read("docs/security.md")).toContain(`${DOCUMENTED.limit} failures per ${DOCUMENTED.period} s`);
  });

  it("self-hosted: the limiter the Worker gets allows 20 failures per address in a window, refuses the 21st, and starts over in the next", async () => {
    let now = 60_000 * 1000 + 5_000;
    const limiter = selfHostedLimiter(() => now);
    const results = [];
    for (let i = 0; i < 21; i++) results.push((await limiter.limit({ key: "10.0.0.1" })).success);
    expect(results).toEqual([...Array(20).fill(true), false]);
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
