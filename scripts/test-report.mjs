// What `npm test` (scripts/test.mjs) reads back from each vitest run: a reporter (this module's
// default export, `--reporter=./scripts/test-report.mjs`) that writes every file's project, start,
// end and tests (name, state, time) to $JOIN_BROKER_TEST_REPORT as JSON; and the functions that
// sum those reports up: tests passed and failed per project, and the slowest tests of the run.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { stripVTControlCharacters } from "node:util";
import { projectCacheDir } from "./build-cache.mjs";

const ROOT = new URL("..", import.meta.url).pathname;

/** A vitest reporter writing one JSON report of the run (`{ modules: [{ project, file, start, end, state, tests, errors }], unhandledErrors }`). */
export default class TestReport {
  #out = process.env.JOIN_BROKER_TEST_REPORT;
  #starts = new Map();
  #ends = new Map();

  // A file runs once per project that holds it (an e2e file on each etcd version): keyed by both.
  onTestModuleStart(module) {
    this.#starts.set(`${module.project.name}:${module.moduleId}`, Date.now());
  }

  onTestModuleEnd(module) {
    this.#ends.set(`${module.project.name}:${module.moduleId}`, Date.now());
  }

  onTestRunEnd(modules, unhandledErrors, reason) {
    if (!this.#out) return;
    const report = {
      reason,
      unhandledErrors: unhandledErrors.length,
      modules: modules.map((m) => {
        const tests = [...m.children.allTests()].map((t) => {
          const result = t.result();
          const test = { name: t.fullName, state: result.state, ms: Math.round(t.diagnostic()?.duration ?? 0) };
          // The failure's first lines: the summary at the end of a run is often all a CI log keeps.
          return result.state === "failed" ? { ...test, error: firstLines(result.errors?.[0]?.message ?? "", 12, 1500) } : test;
        });
        return {
          project: m.project.name,
          file: relative(ROOT, m.moduleId),
          // null for a file that never started or ended (a run stopped early).
          start: this.#starts.get(`${m.project.name}:${m.moduleId}`) ?? null,
          end: this.#ends.get(`${m.project.name}:${m.moduleId}`) ?? null,
          state: m.state(),
          // A file that fails to load, or whose hook fails, fails no test but fails the run.
          errors: m.errors().length,
          tests,
        };
      }),
    };
    mkdirSync(dirname(this.#out), { recursive: true });
    writeFileSync(this.#out, `${JSON.stringify(report)}\n`);
  }
}

/** At most `lines` lines and `chars` characters of a message, colour codes removed. */
function firstLines(message, lines, chars) {
  const plain = stripVTControlCharacters(message);
  const kept = plain.split("\n").slice(0, lines).join("\n");
  return kept.length > chars ? `${kept.slice(0, chars)}…` : kept;
}

/** A report written by the reporter above, or null when the run wrote none (it did not get that far). */
export function readReport(path) {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch {
    return null;
  }
}

/**
 * Tests passed and failed per project, with each project's span (first file's start to last
 * file's end, ms since the epoch). A file that failed without a failed test (it did not load, a
 * hook failed) counts as one failure.
 */
export function projectTotals(report) {
  const out = new Map();
  for (const m of report?.modules ?? []) {
    const t = out.get(m.project) ?? { passed: 0, failed: 0, skipped: 0, files: 0, start: Infinity, end: 0 };
    const failedTests = m.tests.filter((x) => x.state === "failed").length;
    t.passed += m.tests.filter((x) => x.state === "passed").length;
    t.skipped += m.tests.filter((x) => x.state === "skipped").length;
    t.failed += failedTests || (m.state === "failed" || m.errors > 0 ? 1 : 0);
    t.files += 1;
    if (m.start) t.start = Math.min(t.start, m.start);
    if (m.end) t.end = Math.max(t.end, m.end);
    out.set(m.project, t);
  }
  return out;
}

/** Every test of these reports with its project and file, slowest first. */
export function slowestTests(reports, count = 20) {
  const all = reports.flatMap((r) => (r?.modules ?? []).flatMap((m) => m.tests.map((t) => ({ ...t, project: m.project, file: m.file }))));
  return all.sort((a, b) => b.ms - a.ms).slice(0, count);
}

/** Every file of these reports with how long it took (start to end, hooks included), slowest first. */
export function slowestFiles(reports, count = 10) {
  const all = reports.flatMap((r) =>
    (r?.modules ?? []).filter((m) => m.start && m.end).map((m) => ({ project: m.project, file: m.file, ms: m.end - m.start })),
  );
  return all.sort((a, b) => b.ms - a.ms).slice(0, count);
}

/** The failed tests (each with its failure's first lines, indented) and files that failed without one, of these reports. */
export function failures(reports) {
  return reports.flatMap((r) =>
    (r?.modules ?? []).flatMap((m) => {
      const failed = m.tests
        .filter((t) => t.state === "failed")
        .map((t) => [`${m.project}: ${m.file} > ${t.name}`, ...(t.error ? t.error.split("\n").map((l) => `    ${l}`) : [])].join("\n"));
      return failed.length || (m.state !== "failed" && !m.errors) ? failed : [`${m.project}: ${m.file} (the file failed: it did not load, or a hook failed)`];
    }),
  );
}

/** The committed record of how long each file took (`project:file` → ms), for the order of a first run. */
export const DURATIONS_FILE = "test/support/test-durations.json";

/** This machine's record of how long each file took in earlier runs. */
export function machineDurationsFile() {
  return join(projectCacheDir(), "test-durations.json");
}

/** Each file's duration in these reports (`project:file` → ms; files that ran to their end). */
export function fileDurations(reports) {
  const out = {};
  for (const m of reports.flatMap((r) => r?.modules ?? [])) if (m.start && m.end) out[`${m.project}:${m.file}`] = m.end - m.start;
  return out;
}

/** Merges these durations into this machine's record (written whole, by a rename). */
export function recordDurations(durations) {
  const path = machineDurationsFile();
  let known = {};
  try {
    known = JSON.parse(readFileSync(path, "utf8"));
  } catch {
    /* the first run here */
  }
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, `${JSON.stringify(sortKeys({ ...known, ...durations }), null, 1)}\n`);
  renameSync(tmp, path);
}

export function sortKeys(record) {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : 1)));
}
