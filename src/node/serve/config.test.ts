import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { COMPATIBILITY_DATE } from "./config.ts";

const wranglerToml = readFileSync(join(import.meta.dirname, "../../../wrangler.toml"), "utf8");

describe("the self-hosted workerd config", () => {
  it("runs the Worker at wrangler.toml's compatibility date", () => {
    expect(wranglerToml).toContain(`compatibility_date = "${COMPATIBILITY_DATE}"`);
  });
});
