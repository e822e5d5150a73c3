/**
 * scripts/test-report.mjs as vitest runs it: a real vitest run of a file with a failing test
 * writes a report whose summary names the test and the failure's first lines, which is often all
 * a CI log keeps of a run.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, expect, it } from "vitest";
import { failures, readReport } from "../../scripts/test-report.mjs";

const ROOT = join(import.meta.dirname, "../..");
const dir = mkdtempSync(join(tmpdir(), "join-broker-test-report-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it("keeps a failed test's first lines of failure, without colour codes, for the summary", { timeout: 60_000 }, async () => {
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  writeFileSync(join(dir, "vitest.config.mjs"), "export default {};\n");
  writeFileSync(
    join(dir, "sample.test.mjs"),
    [
      'import { expect, it } from "vitest";',
      'it("passes", () => expect(1).toBe(1));',
      'it("fails with a reason", () => expect(["settles-within-bound"], "n2 neither joined nor exited").toEqual([]));',
      "",
    ].join("\n"),
  );
  const out = join(dir, "report.json");
  const run = promisify(execFile)(
    process.execPath,
    [join(ROOT, "node_modules/vitest/vitest.mjs"), "run", "--root", dir, `--reporter=${join(ROOT, "scripts/test-report.mjs")}`],
    {
      cwd: dir,
      env: { ...process.env, JOIN_BROKER_TEST_REPORT: out, FORCE_COLOR: "1" },
    },
  );
  await expect(run).rejects.toMatchObject({ code: 1 });
  const [failure, ...rest] = failures([readReport(out)]);
  expect(rest).toEqual([]);
  expect(failure).toMatch(/sample\.test\.mjs > fails with a reason\n {4}n2 neither joined nor exited/);
  expect(failure).toContain("settles-within-bound");
  expect(failure).not.toContain("\x1b[");
});
