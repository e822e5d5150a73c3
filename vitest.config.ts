import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { LongestFirst } from "./test/support/longest-first.ts";
import { CONTRACT_FILES, e2eProjects } from "./test/support/test-plan.mjs";

export const TEST_ADMIN_TOKEN = "test-admin-token-0123456789";

/**
 * End-to-end files that run at once ($E2E_WORKERS): they spend most of their time waiting on etcd
 * (its 5 s health window, elections, leases, long polls), not on the CPU, and share nothing (ports
 * and lab subnets are claimed machine-wide, every data directory is a file's own). 4 is the
 * fastest on the 2-core machine at which every test passed; 6 was faster but failed one
 * (docs/testing.md, Numbers).
 */
export const E2E_WORKERS = Number(process.env.E2E_WORKERS) || 4;

/**
 * Unit and workerd test files at once ($IN_PROCESS_WORKERS): one per core, for the quick loop.
 * `npm test` runs them one at a time, beside the end-to-end files: CPU-bound tests with a time
 * bound each, which two at a time beside everything else would leave each half the CPU.
 */
const IN_PROCESS_WORKERS = Number(process.env.IN_PROCESS_WORKERS) || availableParallelism();

/** The end-to-end projects' shared settings (real processes: wrangler dev, the join API, etcd, agents). */
const E2E_TEST = {
  environment: "node",
  testTimeout: 180_000,
  hookTimeout: 120_000,
  // A page's or a process's answer on a loaded machine: 10 s, not vitest's 1 s.
  expect: { poll: { timeout: 10_000 } },
  fileParallelism: true,
  maxWorkers: E2E_WORKERS,
} as const;

export default defineConfig({
  test: {
    // The default reporter marks each test slower than this with its time; `npm test` lists the 20 slowest.
    slowTestThreshold: 30_000,
    // Across every project of a run, the longest files first (test/support/longest-first.ts).
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        // Pure modules, next to their code: no workerd, no network.
        // Hang guards as the workerd project's: RSA key generation and the built CLI take seconds under load.
        test: {
          name: "unit",
          include: ["src/**/*.test.ts", "test/tooling/**/*.test.ts"],
          environment: "node",
          maxWorkers: IN_PROCESS_WORKERS,
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        // The Worker and its Durable Object in the real workerd runtime.
        plugins: [
          cloudflareTest({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: { bindings: { ADMIN_TOKEN: TEST_ADMIN_TOKEN, ISSUER: "https://broker.test" } },
          }),
        ],
        test: {
          name: "worker",
          include: ["test/worker/**/*.test.ts"],
          // Hang guards, not speed limits: the races' hundred rounds take 6 s on a quiet machine and
          // several times that beside the end-to-end files and the lab steps in `npm test`.
          testTimeout: 120_000,
          hookTimeout: 60_000,
          maxWorkers: IN_PROCESS_WORKERS,
          // The Durable Object logs every state change as a JSON line: keep test output readable.
          onConsoleLog: (log) => !log.startsWith('{"cluster"'),
        },
      },
      {
        // The Worker tests' HTTP contract (every route, every bad input) once more, over loopback
        // against `join-broker serve`: `cloudflare:workers` is replaced by a client of that process.
        resolve: { alias: { "cloudflare:workers": fileURLToPath(new URL("./test/support/serve-contract-exports.ts", import.meta.url)) } },
        test: {
          name: "contract-serve",
          include: CONTRACT_FILES,
          environment: "node",
          // A `join-broker serve` per file (test/support/serve-contract-setup.ts).
          setupFiles: ["test/support/serve-contract-setup.ts"],
          testTimeout: 30_000,
          hookTimeout: 120_000,
          // It runs beside the end-to-end projects in `npm test`, sharing their workers.
          maxWorkers: E2E_WORKERS,
        },
      },
      {
        // Real processes on loopback: every e2e file, on $E2E_ETCD_VERSION (else Debian's etcd 3.4).
        test: { name: "e2e", include: ["test/e2e/**/*.test.ts"], ...E2E_TEST },
      },
      // `npm test` (JOIN_BROKER_TEST_MATRIX=1): the e2e files once per etcd version, each project
      // with its version's files and environment (test/support/test-plan.mjs), all in one run.
      ...(process.env.JOIN_BROKER_TEST_MATRIX === "1"
        ? e2eProjects().map((p) => ({ test: { name: p.name, include: p.include, exclude: p.exclude, env: p.env, ...E2E_TEST } }))
        : []),
    ],
  },
});
