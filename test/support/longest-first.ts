/**
 * The order vitest starts test files in: the longest first, across every project of the run, so
 * that with several files at once the last to finish is a short one. Vitest's own order runs one
 * project after another (every etcd 3.4 file before the first 3.6 one), and knows durations only
 * from the same checkout's last run. A file's expected duration is the first known of: vitest's
 * cache (this checkout's last run), this machine's record of earlier `npm test` runs
 * (~/.cache/etcd-join-broker/test-durations.json, written by scripts/test.mjs), the committed
 * record (test/support/test-durations.json); a file none of them knows runs first (it may be long).
 */
import { readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { DURATIONS_FILE, machineDurationsFile } from "../../scripts/test-report.mjs";

type Durations = Record<string, number>;

function read(path: string): Durations {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as Durations;
  } catch {
    return {};
  }
}

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const records = [read(machineDurationsFile()), read(join(root, DURATIONS_FILE))];
    const expected = (spec: TestSpecification): number => {
      const file = relative(root, spec.moduleId);
      const key = `${spec.project.name}:${file}`;
      const cached = this.ctx.cache.getFileTestResults(key)?.duration;
      if (cached) return cached;
      for (const record of records) {
        if (record[key]) return record[key];
        // The same file in another project (another etcd version, or the plain `e2e` project).
        const other = Object.entries(record)
          .filter(([k]) => k.endsWith(`:${file}`))
          .map(([, ms]) => ms);
        if (other.length) return Math.max(...other);
      }
      return Infinity;
    };
    const order = new Map(files.map((f) => [f, expected(f)]));
    return [...files].sort((a, b) => {
      const [x, y] = [order.get(a)!, order.get(b)!];
      return x === y ? 0 : x > y ? -1 : 1;
    });
  }
}
