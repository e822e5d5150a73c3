/**
 * The gate tests' installer (test/support/etcd-installer.mjs) against the etcd under test, with
 * the etcdctl beside it (Debian's for 3.4): when etcd refuses an add, the retry message carries
 * etcd's own words, so the gate tests' "no installer was told too many learner members" can see
 * that message should it ever come (etcdctl 3.6 writes a warning line before etcd's error).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { EtcdGateway } from "../../src/node/etcd/gateway.ts";
import { ensureTool, memberAddress, startSingleNodeEtcd, type MemberAddress, type TestEtcd } from "../support/etcd.ts";

const INSTALLER = join(import.meta.dirname, "../support/etcd-installer.mjs");

let etcd: TestEtcd;
let scratch: string;
let installer: ChildProcess | null = null;

/**
 * Stops the installer of the test before, with the etcdctl it may be running (its process
 * group: etcd, started detached, is not in it): an etcdctl left running could still add its
 * learner after the next test made room.
 */
async function stopInstaller(): Promise<void> {
  const proc = installer;
  installer = null;
  if (!proc?.pid || proc.exitCode !== null || proc.signalCode !== null) return;
  const gone = new Promise((ok) => proc.once("exit", ok));
  try {
    process.kill(-proc.pid, "SIGKILL");
  } catch {
    proc.kill("SIGKILL");
  }
  await gone;
}

beforeAll(async () => {
  etcd = await startSingleNodeEtcd({ name: "inst-0" });
  scratch = mkdtempSync(join(tmpdir(), "join-broker-installer-"));
});

/** The pid in an installer's pid file, or null. */
function etcdPid(dataDir: string): number | null {
  try {
    return Number(readFileSync(`${dataDir}.pid`, "utf8")) || null;
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The etcdctl beside the etcd under test (Debian's for 3.4), else the one of its release. */
async function etcdctlBinary(): Promise<string> {
  const beside = join(dirname(etcd.bin), "etcdctl");
  return existsSync(beside) ? beside : await ensureTool("etcdctl");
}

/**
 * Starts the installer's `join` for `node` against the etcd under test (as `installer`, in a
 * process group of its own): its stdout and stderr as they came, and its exit code once closed.
 */
function startInstaller(
  node: MemberAddress,
  dataDir: string,
  etcdctl: string,
  env?: NodeJS.ProcessEnv,
): { output: () => string; closed: Promise<number | null> } {
  const proc = spawn(
    process.execPath,
    [
      INSTALLER,
      "join",
      "--name",
      node.name,
      "--data-dir",
      dataDir,
      "--peer-url",
      node.peerURL,
      "--client-url",
      node.clientURL,
      "--endpoints",
      etcd.first.clientURL,
      "--etcd-bin",
      etcd.bin,
      "--etcdctl",
      etcdctl,
    ],
    { stdio: ["ignore", "pipe", "pipe"], ...(env ? { env } : {}), detached: true },
  );
  installer = proc;
  let output = "";
  proc.stdout!.on("data", (d) => (output += d));
  proc.stderr!.on("data", (d) => (output += d));
  const closed = new Promise<number | null>((ok) => proc.once("close", ok));
  return { output: () => output, closed };
}

const startedEtcds: number[] = [];

afterAll(async () => {
  await stopInstaller();
  for (const pid of startedEtcds) if (pid > 1 && alive(pid)) process.kill(pid, "SIGKILL");
  await etcd?.cleanup();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

it("tells etcd's own 'too many learner members' in its retry message when a learner is already there", async () => {
  const etcdctl = await etcdctlBinary();
  // Another node's learner fills etcd's default learner limit (one, on every version).
  const stray = await memberAddress("inst-stray");
  const added = await new EtcdGateway(etcd.first.clientURL).memberAdd([stray.peerURL], { learner: true });
  expect(added.ok).toBe(true);

  const node = await memberAddress("inst-1");
  // As a shell would pass it from a user's environment, which etcdctl 3.6 warns about.
  const run = startInstaller(node, join(scratch, "data"), etcdctl, { ...process.env, ETCDCTL_API: "3" });
  await expect
    .poll(() => run.output(), { timeout: 60_000, interval: 200 })
    .toMatch(/\[installer inst-1\] adding a learner: .*too many learner members.*; retrying/);
  expect(run.output()).not.toMatch(/environment variable/i);
});

it("starts its etcd again when it exits before the member is promoted, as the kubelet restarts kubeadm's static pod", async () => {
  await stopInstaller();
  const gateway = new EtcdGateway(etcd.first.clientURL);
  const list = await gateway.memberList();
  if (!list.ok) throw new Error(list.error.message);
  for (const m of list.value.members.filter((x) => x.isLearner)) expect((await gateway.memberRemove(m.id)).ok).toBe(true);
  const etcdctl = await etcdctlBinary();

  // Its client port is taken, so the first etcd it starts exits at once (as one that asked a
  // peer which had not heard of this member yet exits); the port is freed once that happened.
  const node = await memberAddress("inst-2");
  const squatter = createServer();
  await new Promise<void>((ok) => squatter.listen(Number(new URL(node.clientURL).port), "127.0.0.1", ok));
  const dataDir = join(scratch, "data-2");
  const run = startInstaller(node, dataDir, etcdctl, { ...process.env, ETCDCTL_API: "3" });
  await expect.poll(() => run.output(), { timeout: 60_000, interval: 200 }).toMatch(/started etcd \(existing, pid (\d+)\)/);
  const first = Number(/started etcd \(existing, pid (\d+)\)/.exec(run.output())![1]);
  startedEtcds.push(first);
  await expect.poll(() => alive(first), { timeout: 60_000, interval: 200 }).toBe(false);
  await new Promise((ok) => squatter.close(ok));

  expect(await run.closed).toBe(0);
  const second = etcdPid(dataDir);
  if (second) startedEtcds.push(second);
  expect(run.output()).toMatch(/etcd is not running: starting it again/);
  const after = await gateway.memberList();
  expect(after.ok && after.value.members.find((m) => m.name === "inst-2")?.isLearner).toBe(false);
});

it("takes 'Peer URLs already exists' after an add whose answer was lost as done, as kubeadm does, and finds its member", async () => {
  await stopInstaller();
  const etcdctl = await etcdctlBinary();
  // An etcdctl whose first `member add` that goes through has its answer lost (a timeout).
  // A refused add (etcd refuses changes for 5 s after the last test's promotion) is answered
  // as it is and not run again here: a second add could otherwise go through unobserved.
  const lossy = join(scratch, "etcdctl-lossy");
  const marker = join(scratch, "add-answer-lost");
  writeFileSync(
    lossy,
    `#!/bin/sh
case "$*" in *"member add"*)
  if [ ! -e '${marker}' ]; then
    if out=$('${etcdctl}' "$@" 2>&1); then : > '${marker}'; echo 'Error: context deadline exceeded' >&2; exit 1; fi
    echo "$out" >&2; exit 1
  fi ;;
esac
exec '${etcdctl}' "$@"
`,
    { mode: 0o755 },
  );
  const node = await memberAddress("inst-3");
  const dataDir = join(scratch, "data-3");
  const run = startInstaller(node, dataDir, lossy);
  const code = await run.closed;
  const pid = etcdPid(dataDir);
  if (pid) startedEtcds.push(pid);
  expect(existsSync(marker), run.output()).toBe(true);
  expect(run.output()).toMatch(/the add's answer was lost; found in the member list/);
  expect(code).toBe(0);
  const after = await new EtcdGateway(etcd.first.clientURL).memberList();
  expect(after.ok && after.value.members.filter((m) => m.peerURLs.includes(node.peerURL)).map((m) => m.isLearner)).toEqual([false]);
});
