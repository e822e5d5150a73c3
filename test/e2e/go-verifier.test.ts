/**
 * The Go verifier (integrations/go/admission) against a real broker: this starts wrangler dev and
 * runs the module's TestLiveBroker with the broker's URL and admin token in its environment.
 */
import { spawn } from "node:child_process";
import { afterAll, beforeAll, expect, it } from "vitest";
import { GO_MODULE, findGo } from "../../scripts/go-test.mjs";
import { startBroker, type BrokerProcess } from "../support/broker.ts";

let broker: BrokerProcess;
beforeAll(async () => {
  broker = await startBroker();
});
afterAll(async () => broker?.stop());

it("passes the Go module's live-broker test", async () => {
  const go = findGo();
  if (!go) throw new Error("no 'go' found (PATH, $GO, /usr/local/go/bin): install Go 1.24 or newer");
  const { code, output } = await new Promise<{ code: number | null; output: string }>((done) => {
    const child = spawn(go, ["test", "-count=1", "-v", "-run", "^TestLiveBroker$", "./admission"], {
      cwd: GO_MODULE,
      env: { ...process.env, GOFLAGS: "-mod=readonly", JOIN_BROKER_URL: broker.url, JOIN_BROKER_ADMIN_TOKEN: broker.adminToken },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    child.on("close", (code) => done({ code, output }));
  });
  // A skipped test would pass silently: it must have run, every subtest with it.
  expect(output, output).toMatch(/--- PASS: TestLiveBroker /);
  expect(output, output).not.toMatch(/--- (FAIL|SKIP)/);
  expect(code, output).toBe(0);
  expect(output.match(/--- PASS: TestLiveBroker\//g)?.length ?? 0).toBeGreaterThanOrEqual(12);
});
