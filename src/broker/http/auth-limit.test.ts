import { describe, expect, it } from "vitest";
import { AUTH_FAILURE_LIMIT, AuthFailureBlocks } from "./auth-limit.ts";

describe("addresses over the failed-authentication limit", () => {
  it("are refused for one period from the refusal, counting down in whole seconds, then allowed again", () => {
    const blocks = new AuthFailureBlocks();
    const t = 1_000_000;
    expect(blocks.retryAfter("10.0.0.1", t)).toBe(0);
    expect(blocks.block("10.0.0.1", t)).toBe(AUTH_FAILURE_LIMIT.period);
    expect(blocks.retryAfter("10.0.0.1", t)).toBe(60);
    expect(blocks.retryAfter("10.0.0.1", t + 1)).toBe(60);
    expect(blocks.retryAfter("10.0.0.1", t + 59_001)).toBe(1);
    expect(blocks.retryAfter("10.0.0.2", t + 1)).toBe(0);
    expect(blocks.retryAfter("10.0.0.1", t + 60_000)).toBe(0);
    expect(blocks.size).toBe(0);
  });

  it("take bounded memory, whatever the number of addresses", () => {
    const blocks = new AuthFailureBlocks(1);
    for (let i = 0; i < 10_000; i++) blocks.block(`a${i}`, 0);
    for (let i = 0; i < 10_000; i++) blocks.block(`c${i}`, 2_000); // the first ones' periods are over: swept
    expect(blocks.size).toBe(10_000);
    expect(blocks.retryAfter("c0", 2_000)).toBe(1);
    const busy = new AuthFailureBlocks(3600);
    for (let i = 0; i < 150_000; i++) busy.block(`b${i}`, i);
    expect(busy.size).toBeLessThanOrEqual(100_000);
    expect(busy.retryAfter("b149999", 150_000)).toBe(3600); // the newest are kept
    expect(busy.retryAfter("b0", 150_000)).toBe(0); // the oldest went first
  });
});
