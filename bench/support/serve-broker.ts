/**
 * Starts the bench Worker (bench/worker/entry.ts, wrapped as serve wraps the broker) the way
 * `join-broker serve` starts the broker: a data directory, workerd from the npm package with the
 * serve configuration (SQLite on local disk), supervised, on a free loopback port. No wrangler
 * and no proxy in front: the figures are the self-hosted runtime's own.
 * @module
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { Writable } from "node:stream";
import { startSelfHosted } from "../../src/node/serve/start.ts";
import { ADMIN_TOKEN, type BenchBroker } from "./broker.ts";
import { ROOT, scratchDir } from "./paths.ts";

const ENTRY = resolve(ROOT, "bench/worker/serve-entry.ts");

export async function startBenchServe(label: string): Promise<BenchBroker> {
  const dataDir = mkdtempSync(join(scratchDir(), `serve-${label}-`));
  let log = "";
  // Keep only the tail: every committed state change may be a log line, and there are many.
  const sink = () =>
    new Writable({
      write(chunk, _encoding, done) {
        log = (log + chunk.toString()).slice(-50_000);
        done();
      },
    });
  const version = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
  const supervisor = await startSelfHosted(
    { host: "127.0.0.1", port: 0, dataDir, adminToken: ADMIN_TOKEN },
    { softwareVersion: version, entry: ENTRY, log: (line) => (log += `${line}\n`), output: { stdout: sink(), stderr: sink() } },
  );
  return {
    url: supervisor.url,
    adminToken: ADMIN_TOKEN,
    persistDir: join(dataDir, "durable-objects"),
    workerdPid: () => supervisor.pid ?? null,
    stop: async () => {
      await supervisor.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
    output: () => log,
  };
}
