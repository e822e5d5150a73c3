/**
 * `npm run demo -- --faults` without a terminal (a CI log, a pipe): every fault it injects is
 * announced as a line when it happens, and the summary's list of kills matches those lines.
 * Three nodes on Debian's etcd, like the demo a new user runs.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../support/broker.ts";

describe("npm run demo -- --faults", () => {
  // Two whole clusters, one under faults: minutes on a cold, busy machine.
  // Waits for two whole 3-node clusters to form, one under faults (the demo's own run).
  it("announces each fault as a line when the output is not a terminal", { timeout: 420_000 }, () => {
    const r = spawnSync(process.execPath, [join(ROOT, "scripts/demo.mjs"), "--nodes", "3", "--faults", "--seed", "7"], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 400_000,
      env: { ...process.env, CI: "true", NO_COLOR: "1" },
    });
    expect({ status: r.status, stderr: r.stderr.slice(-2000) }).toMatchObject({ status: 0 });
    const out = r.stdout;
    expect(out).toMatch(/^\[ *[\d.]+ s\] FAULT: for \d+ s the join API answers 500 or drops the connection; agents retry$/m);
    const killed = [...out.matchAll(/^\[ *[\d.]+ s\] FAULT: killing (ctrl-\d)'s agent.* at (\S+)$/gm)].map((m) => `${m[1]} at ${m[2]}`);
    const restarted = [...out.matchAll(/^\[ *[\d.]+ s\] FAULT: restarting (ctrl-\d)'s agent/gm)].map((m) => m[1]);
    const summary = /^ {2}faults .* killed: (.*)$/m.exec(out)![1];
    expect(killed.length).toBeGreaterThan(0);
    expect(summary.split(", ")).toEqual(killed);
    // Each killed agent is restarted once; restart delays differ, so the order may not.
    expect([...restarted].sort()).toEqual(killed.map((k) => k.split(" ")[0]).sort());
    // It says which etcd it runs and how many it admits at once, and how to admit more.
    expect(out).toMatch(/with real etcd 3\.\d+\.\d+, one admitted at a time, with faults/);
    expect(out).toMatch(/^ {2}time {9}[\d.]+ s from start to the last join \(etcd 3\.\d+\.\d+, maxInFlight 1\)$/m);
    expect(out).toContain("--etcd 3.7 --max-in-flight 2 admits the joiners together");
  });

  it("refuses --max-in-flight above 1 on an etcd that holds one learner, and says what to add", () => {
    const r = spawnSync(process.execPath, [join(ROOT, "scripts/demo.mjs"), "--etcd", "3.5", "--max-in-flight", "3"], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 60_000,
    });
    expect({ status: r.status, stderr: r.stderr }).toEqual({
      status: 2,
      stderr: "--max-in-flight 3 needs etcd 3.6 or newer (3.4 and 3.5 hold one learner at a time): add --etcd 3.7\n",
    });
  });
});
