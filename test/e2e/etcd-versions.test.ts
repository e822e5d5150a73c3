/**
 * The version table (src/node/etcd/versions.ts) against the real etcd under test ($E2E_ETCD_VERSION; `npm
 * test` runs this file on 3.4, 3.5, 3.6 and 3.7): each refusal is provoked and its HTTP status,
 * gRPC code, text and body fields must be the table's, and the gateway client and the join API
 * must classify it as the table says; the learner limit, its flag, the flags the version refuses,
 * the member-list and status fields and the words etcd logs when its member is removed, likewise.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdGateway, classifyEtcdError } from "../../src/node/etcd/gateway.ts";
import { startEtcd, type EtcdProcess } from "../../src/node/etcd/etcd-process.ts";
import { maxLearnersArgs, refusedFlag, type EtcdMinor, type EtcdRefusal, type EtcdTraits } from "../../src/node/etcd/versions.ts";
import { fromEtcdError } from "../../src/node/join-api/outcome.ts";
import { EtcdSupervisor } from "../../src/node/agent/local-etcd/etcd-supervisor.ts";
import { GaveUp } from "../../src/node/agent/core/errors.ts";
import { StateDir } from "../../src/node/agent/files/state-files.ts";
import { etcdPin } from "../../scripts/etcd.mjs";
import { TEST_TIMING, etcdUnderTest, memberAddress, startSingleNodeEtcd, type TestEtcd } from "../support/etcd.ts";

let bin: string;
let version: string;
let minor: EtcdMinor;
let traits: EtcdTraits;

beforeAll(async () => {
  ({ bin, version, minor, traits } = await etcdUnderTest());
});

/** What the join API answers for each refusal (src/node/join-api/outcome.ts). */
const JOIN_API_CODE: Partial<Record<EtcdRefusal, string>> = {
  too_many_learners: "too_many_learners",
  unhealthy_cluster: "etcd_unhealthy",
  not_enough_started: "not_enough_started_members",
  learner_not_ready: "learner_not_in_sync",
  member_not_found: "member_not_found",
  peer_url_exists: "peer_url_conflict",
  member_id_exists: "peer_url_conflict",
};

interface Raw {
  status: number;
  body: Record<string, unknown>;
}

async function post(clientURL: string, path: string, body: unknown): Promise<Raw> {
  const res = await fetch(`${clientURL}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const add = (url: string, peerURL: string, learner = true) =>
  post(url, "/v3/cluster/member/add", learner ? { peerURLs: [peerURL], isLearner: true } : { peerURLs: [peerURL] });
const promote = (url: string, id: string) => post(url, "/v3/cluster/member/promote", { ID: id });
const remove = (url: string, id: string) => post(url, "/v3/cluster/member/remove", { ID: id });
const list = (url: string) => post(url, "/v3/cluster/member/list", {});

/** The answer is exactly the table's entry for this refusal, and every layer classifies it so. */
function expectRefusal(raw: Raw, refusal: EtcdRefusal): void {
  const entry = traits.refusals[refusal];
  expect({ status: raw.status, code: raw.body.code, message: raw.body.message }, `etcd ${version}: ${refusal}`).toEqual({
    status: entry.httpStatus,
    code: entry.grpcCode,
    message: entry.message,
  });
  expect(Object.keys(raw.body).sort()).toEqual([...traits.errorBodyFields].sort());
  if (traits.errorBodyFields.includes("error")) expect(raw.body.error).toBe(entry.message);
  expect(classifyEtcdError(String(raw.body.message), Number(raw.body.code))).toBe(refusal);
  const code = JOIN_API_CODE[refusal];
  if (code) {
    const outcome = fromEtcdError({ kind: refusal, message: entry.message, httpStatus: raw.status, grpcCode: entry.grpcCode });
    expect(!outcome.ok && outcome.code).toBe(code);
  }
}

function expectMemberFields(members: unknown): void {
  expect(Array.isArray(members)).toBe(true);
  for (const m of members as Record<string, unknown>[]) for (const key of Object.keys(m)) expect(traits.memberFields, `member field ${key}`).toContain(key);
}

/** Waits for the start of a second, so that two adds right after it fall in the same second. */
async function startOfASecond(): Promise<void> {
  const ms = Date.now() % 1000;
  if (ms > 300) await new Promise((r) => setTimeout(r, 1000 - ms + 10));
}

function run(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((ok) => {
    execFile(bin, args, { timeout: 15_000 }, (error, stdout, stderr) =>
      ok({ code: error ? ((error as { code?: number }).code ?? null) : 0, output: `${stdout}${stderr}` }),
    );
  });
}

describe("the etcd under test", () => {
  it("is the release scripts/etcd-versions.json pins for its minor version", () => {
    if (process.env.E2E_ETCD_VERSION) expect(minor).toBe(process.env.E2E_ETCD_VERSION);
    expect(version).toBe(etcdPin(minor).release);
  });
});

describe("one voter, default flags", () => {
  let etcd: TestEtcd;
  let url: string;
  beforeAll(async () => {
    etcd = await startSingleNodeEtcd({ name: "v-0" });
    url = etcd.first.clientURL;
  });
  afterAll(async () => etcd?.cleanup());

  it("answers member/list, status and member/add with the table's fields", async () => {
    const listed = await list(url);
    expect(listed.status).toBe(200);
    expect(Object.keys(listed.body.header as object).sort()).toEqual([...traits.headerFields].sort());
    expectMemberFields(listed.body.members);
    // etcd 3.6 and later set the storage version a few seconds after the leader is elected (more on
    // a busy machine): wait for every field the table names before checking the whole set.
    const fields = ["storageVersion", "dbSizeQuota", "downgradeInfo"];
    const expected = fields.filter((f) => traits.statusExtraFields.includes(f));
    let status: Raw = { status: 0, body: {} };
    await expect
      .poll(
        async () => {
          status = await post(url, "/v3/maintenance/status", {});
          return expected.filter((f) => f in status.body);
        },
        { timeout: 60_000, interval: 250 },
      )
      .toEqual(expected);
    expect(status.body.version).toBe(version);
    for (const field of fields) {
      expect(field in status.body, `status field ${field} on ${version}`).toBe(traits.statusExtraFields.includes(field));
    }
  });

  it("refuses learners beyond its default limit, promotes of an unstarted learner and of a voter, and unknown members, as the table says", async () => {
    const added: string[] = [];
    for (let i = 0; i < traits.defaultMaxLearners; i++) {
      const r = await add(url, (await memberAddress(`l-${i}`)).peerURL);
      expect(r.status).toBe(200);
      const member = r.body.member as Record<string, unknown>;
      // An unstarted member has no name and no client URLs; a learner says so, a voter says nothing.
      expect(member.isLearner).toBe(true);
      expect(member.name).toBeUndefined();
      expectMemberFields(r.body.members);
      added.push(String(member.ID));
    }
    expectRefusal(await add(url, (await memberAddress("l-over")).peerURL), "too_many_learners");
    expectRefusal(await promote(url, added[0]!), "learner_not_ready");
    const self = String(((await list(url)).body.header as Record<string, unknown>).member_id);
    expectRefusal(await promote(url, self), "member_not_learner");
    expectRefusal(await promote(url, "12345"), "member_not_found");
    expectRefusal(await remove(url, "12345"), "member_not_found");
    for (const id of added) expect((await remove(url, id)).status).toBe(200);
  });

  it("refuses a second add of a peer URL: 'member ID already exist' within the same second, 'Peer URLs already exists' after it", async () => {
    let peer = "";
    let first: Raw | null = null;
    // On a busy machine the two adds may straddle a second: then try again with another peer URL.
    for (let attempt = 0; ; attempt++) {
      peer = (await memberAddress(`dup-${attempt}`)).peerURL;
      await startOfASecond();
      const second = Math.floor(Date.now() / 1000);
      first = await add(url, peer);
      expect(first.status).toBe(200);
      const again = await add(url, peer);
      if (Math.floor(Date.now() / 1000) !== second && attempt < 10) {
        expect((await remove(url, String((first.body.member as Record<string, unknown>).ID))).status).toBe(200);
        continue;
      }
      expectRefusal(again, "member_id_exists");
      break;
    }
    await new Promise((r) => setTimeout(r, 1_100));
    expectRefusal(await add(url, peer), "peer_url_exists");
    // The gateway client says the same.
    const typed = await new EtcdGateway(url).memberAdd([peer], { learner: true });
    expect(!typed.ok && typed.error.kind).toBe("peer_url_exists");
    expect((await remove(url, String((first!.body.member as Record<string, unknown>).ID))).status).toBe(200);
  });

  it("logs the table's words when a started member is removed, and exits", async () => {
    const address = await memberAddress("gone");
    const added = await add(url, address.peerURL);
    expect(added.status).toBe(200);
    const id = String((added.body.member as Record<string, unknown>).ID);
    const initial = [`v-0=${etcd.first.peerURL}`, `gone=${address.peerURL}`];
    const proc = await etcd.startMember(address, initial);
    expect((await remove(url, id)).status).toBe(200);
    const exited = await Promise.race([proc.exited, new Promise((r) => setTimeout(() => r("still running"), 30_000))]);
    expect(exited).not.toBe("still running");
    const log = readFileSync(join(etcd.dir, "gone.log"), "utf8");
    expect(
      traits.removedMessages.some((m) => log.includes(m)),
      `etcd ${version}'s log: ${log.slice(-2000)}`,
    ).toBe(true);
  });
});

describe("two voters", () => {
  let dir: string;
  let procs: EtcdProcess[] = [];
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop(3_000)));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("with a voter that never started: refuses a learner (unhealthy: the leader cannot reach every voter) and another voter (too few started); without quorum, a write is 'not now'", async () => {
    dir = mkdtempSync(join(tmpdir(), "join-broker-etcd-versions-"));
    const [a, b] = [await memberAddress("a"), await memberAddress("b")];
    const initial = [`a=${a.peerURL}`, `b=${b.peerURL}`];
    const common = {
      bin,
      ...TEST_TIMING,
      initialCluster: initial,
      initialClusterState: "new" as const,
      initialClusterToken: `versions-${process.pid}`,
      waitFor: "none" as const,
    };
    procs = [
      await startEtcd({ ...common, ...a, dataDir: join(dir, "a"), logFile: join(dir, "a.log") }),
      await startEtcd({ ...common, ...b, dataDir: join(dir, "b"), logFile: join(dir, "b.log") }),
    ];
    await Promise.all(procs.map((p) => p.waitUntil("healthy", 60_000)));

    // A third voter that never starts: allowed (2 of 3 started is a quorum) once the leader has
    // been connected to the other voter for etcd's 5 s health window; refused as unhealthy before.
    const c = await memberAddress("c");
    const deadline = Date.now() + 30_000;
    let r = await add(a.clientURL, c.peerURL, false);
    while (r.status !== 200 && Date.now() < deadline) {
      expectRefusal(r, "unhealthy_cluster");
      await new Promise((ok) => setTimeout(ok, 250));
      r = await add(a.clientURL, c.peerURL, false);
    }
    expect(r.status).toBe(200);
    // Now the leader can never reach every voter: any change is unhealthy...
    expectRefusal(await add(a.clientURL, (await memberAddress("l")).peerURL), "unhealthy_cluster");
    // ...and a fourth voter would need 3 started voters of 4, which etcd checks first.
    expectRefusal(await add(a.clientURL, (await memberAddress("d")).peerURL, false), "not_enough_started");

    // Without the other voter there is no quorum: a write times out in one of the table's "not now" answers.
    await procs[1]!.stop(3_000);
    const started = Date.now();
    const put = await post(a.clientURL, "/v3/kv/put", { key: Buffer.from("k").toString("base64"), value: Buffer.from("v").toString("base64") });
    const entry = Object.entries(traits.unavailable).find(([, e]) => e.message === put.body.message);
    expect(entry, `etcd ${version} answered ${put.status} ${JSON.stringify(put.body)} after ${Date.now() - started} ms`).toBeDefined();
    expect({ status: put.status, code: put.body.code }).toEqual({ status: entry![1].httpStatus, code: entry![1].grpcCode });
    expect(Object.keys(put.body).sort()).toEqual([...traits.errorBodyFields].sort());
    expect(classifyEtcdError(String(put.body.message), Number(put.body.code))).toBe("unavailable");
  });
});

describe("flags", () => {
  it("refuses to start with each flag the table says it refuses, in etcd's words", async () => {
    const scratch = mkdtempSync(join(tmpdir(), "join-broker-etcd-flags-"));
    try {
      expect(Object.keys(traits.refusedFlags).length).toBeGreaterThan(0);
      for (const flag of Object.keys(traits.refusedFlags)) {
        const r = await run([`--data-dir=${join(scratch, "d")}`, `${flag}=1`]);
        expect(r.code, `${flag} on ${version}`).not.toBe(0);
        expect(r.output).toContain(`flag provided but not defined: -${flag.replace(/^--/, "")}`);
        expect(refusedFlag(traits, [`${flag}=1`])?.flag).toBe(flag);
      }
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  it("the agent's supervisor names this version and refuses, before starting etcd, each flag it refuses", async () => {
    const scratch = mkdtempSync(join(tmpdir(), "join-broker-etcd-supervisor-"));
    try {
      const supervisor = new EtcdSupervisor(bin, new StateDir(join(scratch, "state")), join(scratch, "data"));
      expect(await supervisor.version()).toMatchObject({ version, minor, traits });
      for (const flag of Object.keys(traits.refusedFlags)) {
        const refused = supervisor.start(["--name=x", `${flag}=1`]);
        await expect(refused).rejects.toBeInstanceOf(GaveUp);
        await expect(refused).rejects.toThrow(`etcd ${version} (${bin}) does not take ${flag}: ${traits.refusedFlags[flag]}`);
        expect(supervisor.running).toBe(false);
      }
      await expect(supervisor.checkFlags(["--name=x", ...(traits.maxLearnersFlag ? maxLearnersArgs(traits, 4) : [])])).resolves.toBeUndefined();
      const missing = new EtcdSupervisor(join(scratch, "no-such-etcd"), new StateDir(join(scratch, "state2")), join(scratch, "data2"));
      await expect(missing.checkFlags([])).rejects.toThrow(/cannot run/);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  it("takes the learner limit's flag where the table has one, and then allows that many learners", async () => {
    if (!traits.maxLearnersFlag) {
      expect(() => maxLearnersArgs(traits, 2)).toThrow(/needs etcd 3.6/);
      expect(traits.refusedFlags["--max-learners"]).toBeDefined();
      return;
    }
    const args = maxLearnersArgs(traits, 3);
    expect(args).toEqual([`${traits.maxLearnersFlag}=3`]);
    const etcd = await startSingleNodeEtcd({ name: "m-0", extraArgs: args });
    try {
      for (let i = 0; i < 3; i++) expect((await add(etcd.first.clientURL, (await memberAddress(`m-${i + 1}`)).peerURL)).status).toBe(200);
      expectRefusal(await add(etcd.first.clientURL, (await memberAddress("m-4")).peerURL), "too_many_learners");
    } finally {
      await etcd.cleanup();
    }
  });
});
