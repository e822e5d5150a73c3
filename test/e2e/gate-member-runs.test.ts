/**
 * Gate mode's start report, on the etcd under test: a joiner's member counts as started once its
 * etcd runs as a member of the cluster (it serves its peer URL), not only once it has a name. A
 * member whose name cannot be published (here: its cluster lost quorum after the add, as a member
 * sent a snapshot on 3.6+ waits 7 s for its publish) is reported all the same, and one whose etcd
 * does not run is not. etcd serves its peer URL only after comparing its --initial-cluster with
 * the cluster's, so the report still comes after the check the start rule protects.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { AgentOptions } from "../../src/node/agent/core/agent-options.ts";
import type { Reporter } from "../../src/node/agent/core/progress.ts";
import type { StateDir } from "../../src/node/agent/files/state-files.ts";
import { OwnMember } from "../../src/node/agent/gate/own-member.ts";
import { EtcdGateway, isRetryableEtcdError, memberByPeerUrl } from "../../src/node/etcd/gateway.ts";
import { etcdUnderTest, memberAddress, startSingleNodeEtcd, type TestEtcd } from "../support/etcd.ts";

let etcd: TestEtcd;
let stateDir: string;

beforeAll(async () => {
  etcd = await startSingleNodeEtcd({ name: "seed", bin: (await etcdUnderTest()).bin });
  stateDir = mkdtempSync(join(tmpdir(), "gate-member-runs-"));
}, 120_000);

afterAll(async () => {
  await etcd?.cleanup();
  if (stateDir) rmSync(stateDir, { recursive: true, force: true });
});

it("a joiner's member is reported started once its etcd serves its peer URL, before it has a name; not while its etcd does not run", async () => {
  const gateway = new EtcdGateway([etcd.first.clientURL], { timeoutMs: 5_000 });
  const seed = `seed=${etcd.first.peerURL}`;
  // A second voter, so that stopping it later takes the cluster's quorum.
  const voter = await memberAddress("voter");
  expect((await gateway.memberAdd([voter.peerURL], { learner: false })).ok).toBe(true);
  const voterEtcd = await etcd.startMember(voter, [seed, `voter=${voter.peerURL}`]);

  const joiner = await memberAddress("joiner");
  // etcd takes the add once the seed has been connected to the new voter for 5 s.
  const addBy = Date.now() + 60_000;
  for (;;) {
    const added = await gateway.memberAdd([joiner.peerURL], { learner: true });
    if (added.ok) break;
    if (!isRetryableEtcdError(added.error.kind) || Date.now() > addBy) throw new Error(added.error.message);
    await new Promise((ok) => setTimeout(ok, 250));
  }
  const events: string[] = [];
  const reporter = { event: (step: string, message: string) => events.push(`${step}: ${message}`), retry() {}, failure() {}, reachable() {} };
  const own = new OwnMember(
    { peerURL: joiner.peerURL, etcdEndpoints: [etcd.first.clientURL] } as AgentOptions,
    reporter as unknown as Reporter,
    { path: stateDir } as StateDir,
  );
  own.role = "join";

  // Added, its etcd not running: not started.
  expect(await own.findVoter()).toBeNull();
  expect(own.started, events.join("\n")).toBeNull();

  // The cluster loses its quorum: the joiner's etcd can start but never publish its name.
  await voterEtcd.stop(3_000);
  await etcd.startMember(joiner, [seed, `voter=${voter.peerURL}`, `joiner=${joiner.peerURL}`], { waitFor: "none" });
  const deadline = Date.now() + 60_000;
  while (own.started === null && Date.now() < deadline) {
    expect(await own.findVoter()).toBeNull();
    await new Promise((ok) => setTimeout(ok, 200));
  }
  const list = await gateway.memberList();
  if (!list.ok) throw new Error(list.error.message);
  const listed = memberByPeerUrl(list.value.members, joiner.peerURL)!;
  expect(own.started, events.join("\n")).toBe(listed.id);
  // Reported from its peer URL: etcd still lists it without a name.
  expect(listed.started).toBe(false);
  expect(events.at(-1)).toMatch(/runs: its etcd answers on .*, its name not yet published/);
}, 120_000);
