/**
 * The gate tests' installer (test/support/etcd-installer.mjs) against the etcd under test, with
 * the etcdctl beside it (Debian's for 3.4): when etcd refuses an add, the retry message carries
 * etcd's own words, so the gate tests' "no installer was told too many learner members" can see
 * that message should it ever come (etcdctl 3.6 writes a warning line before etcd's error).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { EtcdGateway } from "../../src/node/etcd/gateway.ts";
import { ensureTool, memberAddress, startSingleNodeEtcd, type TestEtcd } from "../support/etcd.ts";

const INSTALLER = join(import.meta.dirname, "../support/etcd-installer.mjs");

let etcd: TestEtcd;
let scratch: string;
let installer: ChildProcess | null = null;

beforeAll(async () => {
  etcd = await startSingleNodeEtcd({ name: "inst-0" });
  scratch = mkdtempSync(join(tmpdir(), "join-broker-installer-"));
});

afterAll(async () => {
  installer?.kill("SIGKILL");
  await etcd?.cleanup();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

it("tells etcd's own 'too many learner members' in its retry message when a learner is already there", async () => {
  const beside = join(dirname(etcd.bin), "etcdctl");
  const etcdctl = existsSync(beside) ? beside : await ensureTool("etcdctl");
  // Another node's learner fills etcd's default learner limit (one, on every version).
  const stray = await memberAddress("inst-stray");
  const added = await new EtcdGateway(etcd.first.clientURL).memberAdd([stray.peerURL], { learner: true });
  expect(added.ok).toBe(true);

  const node = await memberAddress("inst-1");
  // As a shell would pass it from a user's environment, which etcdctl 3.6 warns about.
  installer = spawn(
    process.execPath,
    [INSTALLER, "join", "--name", node.name, "--data-dir", join(scratch, "data"), "--peer-url", node.peerURL, "--client-url", node.clientURL, "--endpoints", etcd.first.clientURL, "--etcd-bin", etcd.bin, "--etcdctl", etcdctl],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ETCDCTL_API: "3" } },
  );
  let output = "";
  installer.stdout!.on("data", (d) => (output += d));
  installer.stderr!.on("data", (d) => (output += d));
  await expect.poll(() => output, { timeout: 60_000, interval: 200 }).toMatch(/\[installer inst-1\] adding a learner: .*too many learner members.*; retrying/);
  expect(output).not.toMatch(/environment variable/i);
});
