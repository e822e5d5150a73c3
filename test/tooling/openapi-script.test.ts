/**
 * `node scripts/openapi.mjs lint`, as the README tells a reader to run it: from a shell whose
 * PATH has no node_modules/.bin (npm scripts add it; a plain shell does not).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "../..");

describe("scripts/openapi.mjs lint", () => {
  it("lints the document with the project's Redocly without node_modules/.bin on PATH", () => {
    const out = join(mkdtempSync(join(tmpdir(), "openapi-")), "openapi.json");
    const PATH = [dirname(process.execPath), "/usr/bin", "/bin"].join(":");
    const r = spawnSync(process.execPath, ["scripts/openapi.mjs", "lint", out], {
      cwd: root,
      encoding: "utf8",
      env: { ...process.env, PATH },
      timeout: 120_000,
    });
    expect({ status: r.status, output: `${r.stdout}${r.stderr}` }).toEqual({ status: 0, output: expect.stringMatching(/valid/) });
  }, 120_000);
});
