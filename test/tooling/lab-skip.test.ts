/**
 * Where the lab cannot run (not root), its tests skip with the reason, except under CI=true,
 * where a skipped lab would hide that the network faults were never tried: there it fails.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { labSkipReason, labUnavailable } from "../lab/lab.ts";

afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
});

describe("the lab without root", () => {
  it("names the reason and skips outside CI", async () => {
    vi.spyOn(process, "getuid").mockReturnValue(1000);
    vi.spyOn(console, "warn").mockImplementation(() => undefined);
    vi.stubEnv("CI", "");
    expect(await labUnavailable()).toMatch(/needs root/);
    expect(await labSkipReason()).toMatch(/needs root/);
  });

  it("fails under CI=true", async () => {
    vi.spyOn(process, "getuid").mockReturnValue(1000);
    vi.stubEnv("CI", "true");
    await expect(labSkipReason()).rejects.toThrow(/CI=true and the lab cannot run: .*needs root/);
  });
});
