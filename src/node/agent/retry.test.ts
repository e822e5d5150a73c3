import { describe, expect, it } from "vitest";
import { Backoff, retryAfterDelay, sleep } from "./retry.ts";

describe("retry timing", () => {
  it("honours Retry-After: never earlier, at most a quarter later", () => {
    expect(retryAfterDelay(4, () => 0)).toBe(4000);
    expect(retryAfterDelay(4, () => 0.999)).toBeLessThanOrEqual(5000);
    for (let i = 0; i < 100; i++) {
      const d = retryAfterDelay(3);
      expect(d).toBeGreaterThanOrEqual(3000);
      expect(d).toBeLessThanOrEqual(3750);
    }
    // Retry-After: 0 still spreads a crowd out a little.
    expect(retryAfterDelay(0, () => 0.5)).toBeGreaterThan(0);
  });

  it("backs off exponentially up to the cap, with jitter, and starts over after reset", () => {
    const top = new Backoff(500, 8_000, () => 1);
    expect([1, 2, 3, 4, 5, 6].map(() => top.next())).toEqual([500, 1000, 2000, 4000, 8000, 8000]);
    const bottom = new Backoff(500, 8_000, () => 0);
    expect([1, 2, 3].map(() => bottom.next())).toEqual([250, 250, 250]);
    top.reset();
    expect(top.next()).toBe(500);
    expect(new Backoff(500, 8_000, () => 0).after(7)).toBe(7000);
    expect(new Backoff(500, 8_000, () => 1).after(null)).toBe(500);
  });

  it("sleeps until aborted, then rejects with the abort reason", async () => {
    const controller = new AbortController();
    const why = new Error("stop");
    const pending = sleep(60_000, controller.signal);
    controller.abort(why);
    await expect(pending).rejects.toBe(why);
    await expect(sleep(10, AbortSignal.abort(why))).rejects.toBe(why);
    await expect(sleep(1)).resolves.toBeUndefined();
  });
});
