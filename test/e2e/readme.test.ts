/**
 * The README's "A bootstrap and a join, by hand" walk-through, run as written (bash, curl, node)
 * against a real broker: it works, and each response it prints stands on its own line.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, startBroker, type BrokerProcess } from "../support/broker.ts";

let broker: BrokerProcess;
beforeAll(async () => {
  broker = await startBroker();
});
afterAll(async () => {
  await broker?.stop();
});

describe("the README walk-through", () => {
  it("runs as written, and every body it prints ends its line", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const block = /### A bootstrap and a join, by hand[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme)![1];
    // Only the broker's address and admin token differ from `npm run dev`'s.
    const script = block.replace(/^B=.*$/m, `B=${broker.url}`).replace(/^ADMIN=.*$/m, `ADMIN=${broker.adminToken}`);
    expect(script).not.toBe(block);
    const r = spawnSync("bash", ["-euo", "pipefail", "-c", script], {
      cwd: mkdtempSync(join(tmpdir(), "join-broker-readme-")),
      encoding: "utf8",
      timeout: 60_000,
      // Not a socket on stdin: bash takes one for a remote shell's and reads the system bashrc,
      // which fails under -u.
      stdio: ["ignore", "pipe", "pipe"],
    });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: "" });
    const lines = r.stdout.split(/\r?\n/);
    const bodies = lines.filter((l) => l.startsWith("{"));
    // status (with ISSUER unset, the issuer is the broker's own origin), audit, and the others.
    expect(bodies.length).toBe(7);
    for (const l of bodies) expect(() => JSON.parse(l), l).not.toThrow();
    expect(lines).toContain("bootstrap");
    expect(JSON.parse(bodies.at(-2)!)).toMatchObject({ cluster: "walk", bootstrapped: true });
  });
});
