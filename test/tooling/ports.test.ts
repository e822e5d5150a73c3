/**
 * scripts/ports.mjs: calls at once in one process never share a port, even when their random
 * picks meet (a test's `Promise.all` of member addresses).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { freePorts } from "../../scripts/ports.mjs";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("freePorts", () => {
  it("gives calls running at once distinct ports when their picks collide", async () => {
    // Each pick repeats once: the second of two calls at once picks what the first just picked.
    let n = 0;
    vi.spyOn(Math, "random").mockImplementation(() => ((Math.floor(n++ / 2) * 7919) % 10_000) / 10_000);
    const got = (await Promise.all([freePorts(2), freePorts(2), freePorts(2)])).flat();
    expect(new Set(got).size).toBe(got.length);
  });
});
