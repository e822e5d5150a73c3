import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

export const TEST_ADMIN_TOKEN = "test-admin-token-0123456789";

export default defineConfig({
  test: {
    projects: [
      {
        // Pure modules, next to their code: no workerd, no network.
        test: { name: "unit", include: ["src/**/*.test.ts", "test/tooling/**/*.test.ts"], environment: "node" },
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
          testTimeout: 30_000,
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
          include: ["test/worker/{auth,bad-input,idempotency,openapi,tokens,verifier,contract-compat}.test.ts"],
          environment: "node",
          globalSetup: ["test/support/serve-contract-setup.ts"],
          testTimeout: 30_000,
          hookTimeout: 120_000,
        },
      },
      {
        // Real processes on loopback: wrangler dev, the join API, etcd, the agent.
        test: {
          name: "e2e",
          include: ["test/e2e/**/*.test.ts"],
          environment: "node",
          testTimeout: 180_000,
          hookTimeout: 120_000,
          // A page's or a process's answer on a loaded machine: 10 s, not vitest's 1 s.
          expect: { poll: { timeout: 10_000 } },
          fileParallelism: false,
        },
      },
    ],
  },
});
