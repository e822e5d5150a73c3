/**
 * Real etcd for tests: finds (or installs) the binary, picks free loopback ports, starts a
 * single-node cluster in a temporary directory, and removes everything afterwards.
 *
 * The etcd version is $E2E_ETCD_VERSION (3.4, 3.5, 3.6 or 3.7: scripts/etcd.mjs installs or builds
 * it; `npm test` sets it per run, see test/support/etcd-matrix.mjs); without it, $ETCD_BIN or
 * Debian's etcd 3.4.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { startEtcd, type EtcdProcess, type StartEtcdOptions } from "../../src/node/etcd/etcd-process.ts";
import { EtcdGateway, type EtcdMember } from "../../src/node/etcd/gateway.ts";
import { freePorts } from "../../scripts/ports.mjs";
import { detectEtcdVersion, etcdTraits, type EtcdMinor, type EtcdTraits } from "../../src/node/etcd/versions.ts";

const TOOLS_MODULE = pathToFileURL(resolve(import.meta.dirname, "../../scripts/tools.mjs")).href;

/** The path of a tool the tests drive, installing its Debian package when missing (scripts/tools.mjs). */
export async function ensureTool(name: "etcd" | "etcdctl" | "spin" | "openssl"): Promise<string> {
  const tools = (await import(TOOLS_MODULE)) as { ensureTool(name: string): string };
  return tools.ensureTool(name);
}

const ETCD_MODULE = pathToFileURL(resolve(import.meta.dirname, "../../scripts/etcd.mjs")).href;

/** The etcd binary of the version under test ($E2E_ETCD_VERSION), else $ETCD_BIN or Debian's. */
export async function etcdBinary(): Promise<string> {
  const version = process.env.E2E_ETCD_VERSION;
  if (!version) return ensureTool("etcd");
  return etcdBinaryFor(version);
}

/** This version's etcd (etcdctl beside it), built or installed by scripts/etcd.mjs if needed. */
export async function etcdBinaryFor(version: string): Promise<string> {
  const etcd = (await import(ETCD_MODULE)) as typeof import("../../scripts/etcd.mjs");
  return etcd.ensureEtcd(version);
}

/** The etcd the tests run against: its binary, release, minor version and table entry. */
export async function etcdUnderTest(): Promise<{ bin: string; version: string; minor: EtcdMinor; traits: EtcdTraits }> {
  const bin = await etcdBinary();
  const { version, minor } = await detectEtcdVersion(bin);
  return { bin, version, minor, traits: etcdTraits(minor) };
}

/** A port that was free on 127.0.0.1 a moment ago, and that this process was never given before. */
export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  return port!;
}

/**
 * An endpoint nothing answers on: it takes each connection and closes it at once. Unlike a port
 * merely found free, its port stays taken until `close`, so no etcd or server started meanwhile
 * (in this process or another) can come to answer there.
 */
export async function closedEndpoint(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((ok, fail) => {
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => ok());
  });
  server.unref();
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((ok) => server.close(() => ok())) };
}

/** Distinct free ports (held open together while picking, so no two are the same). */
export { freePorts };

export interface MemberAddress {
  name: string;
  clientURL: string;
  peerURL: string;
}

/** A name with loopback client and peer URLs on free ports. */
export async function memberAddress(name: string): Promise<MemberAddress> {
  const [client, peer] = await freePorts(2);
  return { name, clientURL: `http://127.0.0.1:${client}`, peerURL: `http://127.0.0.1:${peer}` };
}

export interface TestEtcd {
  /** Where every member's data directory lives; removed by `cleanup`. */
  dir: string;
  bin: string;
  first: EtcdProcess;
  /** Every process started through `startMember`, plus the first. */
  processes: EtcdProcess[];
  /** Starts another member of this cluster (after the join API added it). */
  startMember(address: MemberAddress, initialCluster: readonly string[], options?: Partial<StartEtcdOptions>): Promise<EtcdProcess>;
  /** Stops every process and deletes the directory. */
  cleanup(): Promise<void>;
}

/** Tuned for one shared machine: quick elections, but tolerant of a busy CPU. */
export const TEST_TIMING = { heartbeatIntervalMs: 50, electionTimeoutMs: 750 } as const;

/**
 * Waits until etcd's `/version` names a cluster version. A member that joins before then exits
 * "incompatible with current running cluster" (3.5 reads the one remote's "not_decided" as
 * incompatible), and a learner added meanwhile keeps it undecided: healthy is not enough on a
 * busy machine, where the leader applies that version a moment after its first commit.
 */
async function untilClusterVersionDecided(clientURL: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const body = (await (await fetch(`${clientURL}/version`, { signal: AbortSignal.timeout(5_000) })).json()) as { etcdcluster?: string };
      last = body.etcdcluster ?? "";
      if (last && last !== "not_decided") return;
    } catch (e) {
      last = (e as Error).message;
    }
    await new Promise((ok) => setTimeout(ok, 100));
  }
  throw new Error(`etcd at ${clientURL} decided no cluster version within 30 s (last: ${last})`);
}

/** Starts a single-node etcd cluster on loopback and waits until it is healthy. */
export async function startSingleNodeEtcd(options: { name?: string; token?: string; bin?: string; extraArgs?: readonly string[] } = {}): Promise<TestEtcd> {
  const bin = options.bin ?? (await etcdBinary());
  const dir = mkdtempSync(join(tmpdir(), "join-broker-etcd-"));
  const address = await memberAddress(options.name ?? "ctrl-0");
  const token = options.token ?? `test-${process.pid}-${Date.now()}`;
  const processes: EtcdProcess[] = [];
  const cleanup = async () => {
    await Promise.all(processes.map((p) => p.stop(3_000)));
    rmSync(dir, { recursive: true, force: true });
  };
  let first: EtcdProcess;
  try {
    first = await startEtcd({
      bin,
      ...address,
      ...TEST_TIMING,
      dataDir: join(dir, address.name),
      initialCluster: [`${address.name}=${address.peerURL}`],
      initialClusterState: "new",
      initialClusterToken: token,
      logFile: join(dir, `${address.name}.log`),
      startTimeoutMs: 60_000,
      extraArgs: options.extraArgs,
    });
    await untilClusterVersionDecided(first.clientURL);
  } catch (e) {
    await cleanup();
    throw e;
  }
  processes.push(first);
  return {
    dir,
    bin,
    first,
    processes,
    cleanup,
    async startMember(member, initialCluster, extra = {}) {
      const proc = await startEtcd({
        bin,
        ...member,
        ...TEST_TIMING,
        dataDir: join(dir, member.name),
        initialCluster,
        initialClusterState: "existing",
        logFile: join(dir, `${member.name}.log`),
        waitFor: "serving",
        startTimeoutMs: 60_000,
        extraArgs: options.extraArgs,
        ...extra,
      });
      processes.push(proc);
      return proc;
    },
  };
}

/** For tests that need several learners at once: $E2E_ETCD_VERSION when that is 3.6 or later, else 3.6. */
export const MULTI_LEARNER_VERSION = ["3.6", "3.7"].includes(process.env.E2E_ETCD_VERSION ?? "") ? process.env.E2E_ETCD_VERSION! : "3.6";

/** A single-node etcd of MULTI_LEARNER_VERSION that allows `maxLearners` learners, a gateway to it, and its member list. */
export async function startMultiLearnerEtcd(
  name: string,
  maxLearners: number,
): Promise<{ etcd: TestEtcd; gateway: EtcdGateway; members: () => Promise<EtcdMember[]> }> {
  const etcd = await startSingleNodeEtcd({ name, bin: await etcdBinaryFor(MULTI_LEARNER_VERSION), extraArgs: [`--max-learners=${maxLearners}`] });
  const gateway = new EtcdGateway([etcd.first.clientURL], { timeoutMs: 5_000 });
  const members = async () => {
    const list = await gateway.memberList();
    if (!list.ok) throw new Error(list.error.message);
    return list.value.members;
  };
  return { etcd, gateway, members };
}
