import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { COMPATIBILITY_DATE, workerdConfig, type WorkerdConfigInput } from "./config.ts";

/** wrangler.toml's top-level `compatibility_date`, as the deployed Worker gets it. */
function wranglerCompatibilityDate(): string {
  const toml = readFileSync(join(import.meta.dirname, "../../../wrangler.toml"), "utf8");
  const dates = [...toml.matchAll(/^compatibility_date\s*=\s*"([^"]*)"\s*(?:#.*)?$/gm)].map((m) => m[1]!);
  expect(dates).toHaveLength(1);
  return dates[0]!;
}

/** The `compatibilityDate` the workerd config gives the Worker. */
function configuredDate(config: string): string {
  const dates = [...config.matchAll(/^\s*compatibilityDate = "([^"]*)",$/gm)].map((m) => m[1]!);
  expect(dates).toHaveLength(1);
  return dates[0]!;
}

const input: WorkerdConfigInput = { configDir: "/run/jb", bundle: "/run/jb/worker.js", storageDir: "/var/lib/jb/storage", address: "127.0.0.1:8787" };

describe("the self-hosted workerd config", () => {
  it("runs the Worker at wrangler.toml's compatibility date", () => {
    const date = wranglerCompatibilityDate();
    expect(date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(COMPATIBILITY_DATE).toBe(date);
    expect(configuredDate(workerdConfig(input))).toBe(date);
  });

  it("writes the date it is given, not a fixed one", () => {
    for (const date of ["2031-02-03", "2025-11-30"]) {
      expect(configuredDate(workerdConfig({ ...input, compatibilityDate: date }))).toBe(date);
    }
  });
});
