import { describe, expect, it } from "vitest";
import { TransportError } from "../../../shared/client/exchange.ts";
import { Backoff, retryAfterDelay, retrying, sleep, type Step } from "./retry.ts";

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

  it("treats a Retry-After of 0 as no hint: repeated, it backs off to the cap instead of coming back at once", () => {
    const b = new Backoff(500, 8_000, () => 1);
    expect([1, 2, 3, 4, 5, 6].map(() => b.after(0))).toEqual([500, 1000, 2000, 4000, 8000, 8000]);
    // A real hint is honoured as given, however often it comes.
    expect([1, 2, 3].map(() => b.after(2))).toEqual([2500, 2500, 2500]);
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

describe("retrying", () => {
  it("backs off after no answer and after a not-now, retries at once when asked, and returns the result", async () => {
    const unreachable: string[] = [];
    const steps: (() => Step<string>)[] = [
      () => {
        throw new TransportError("http://x", "ECONNREFUSED");
      },
      () => ({ wait: 0 }),
      () => ({ again: true }),
      () => ({ done: "joined" }),
    ];
    let calls = 0;
    const result = await retrying(
      { backoff: new Backoff(1, 1, () => 0), signal: new AbortController().signal, onUnreachable: (r) => unreachable.push(r) },
      async () => steps[calls++]!(),
    );
    expect([result, calls, unreachable]).toEqual(["joined", 4, ["ECONNREFUSED"]]);
  });

  it("ends on any other exception, and on abort while waiting", async () => {
    const boom = new Error("refused");
    const options = { backoff: new Backoff(60_000, 60_000, () => 1), signal: new AbortController().signal, onUnreachable: () => {} };
    await expect(
      retrying(options, async () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
    const controller = new AbortController();
    const why = new Error("stop");
    const pending = retrying({ ...options, signal: controller.signal }, async () => ({ wait: null }));
    setTimeout(() => controller.abort(why), 5);
    await expect(pending).rejects.toBe(why);
  });
});
