/**
 * Pipelined admission in the join API's membership layer, against a real etcd 3.6 started with
 * `--max-learners 3`: several learners pending at once (each added once the one before it has
 * started), a fourth refused while all three are pending, then promoted back to back; the voters
 * never change until a started, in-sync learner is promoted.
 *
 * Runs on $E2E_ETCD_VERSION when that is 3.6 or later, else on 3.6.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { memberByPeerUrl, type EtcdGateway, type EtcdMember } from "../../src/node/etcd/gateway.ts";
import { Membership, type AddedMember } from "../../src/node/join-api/members.ts";
import { RETRY_AFTER } from "../../src/node/join-api/outcome.ts";
import { MULTI_LEARNER_VERSION as VERSION, memberAddress, startMultiLearnerEtcd, type MemberAddress, type TestEtcd } from "../support/etcd.ts";

const MAX_LEARNERS = 3;

let etcd: TestEtcd;
let gateway: EtcdGateway;
let members: () => Promise<EtcdMember[]>;

beforeAll(async () => {
  ({ etcd, gateway, members } = await startMultiLearnerEtcd("pl-0", MAX_LEARNERS));
}, 600_000);

afterAll(async () => etcd?.cleanup());

it(`holds several learners at once on etcd ${VERSION} and promotes them back to back`, async () => {
  const lines: string[] = [];
  // Every admission active; no holding, so each "not now" is seen as it is.
  const membership = new Membership({ gateway, admissionStatus: async () => ({ active: true }), holdMs: 0, log: (l) => lines.push(l) });
  const request = (a: MemberAddress) => ({ node: a.name, peerURL: a.peerURL, jti: `adm_${a.name}`, token: `t_${a.name}` });
  const joiners = await Promise.all(["pl-1", "pl-2", "pl-3"].map((n) => memberAddress(n)));
  const added: AddedMember[] = [];

  for (const [i, joiner] of joiners.entries()) {
    const answer = await membership.addLearner(request(joiner));
    if (!answer.ok) throw new Error(`${joiner.name}: ${answer.code} ${answer.detail}`);
    expect(answer.value).toMatchObject({ learner: true });
    expect(answer.value.initialCluster).toHaveLength(i + 2);
    added.push(answer.value);
    if (i + 1 < joiners.length) {
      // The next one waits until this one has started: a joining etcd checks its initialCluster
      // against the member list and would exit had another member been added meanwhile.
      const early = await membership.addLearner(request(joiners[i + 1]!));
      expect(!early.ok && [early.code, early.retryAfter]).toEqual(["learner_not_started", RETRY_AFTER.learnerNotStarted]);
    }
    await etcd.startMember(joiner, answer.value.initialCluster);
  }

  // Three learners at once, all started; the voters are still the bootstrap member alone.
  let now = await members();
  expect(
    now
      .filter((m) => m.isLearner)
      .map((m) => m.name)
      .sort(),
  ).toEqual(["pl-1", "pl-2", "pl-3"]);
  expect(now.filter((m) => !m.isLearner).map((m) => m.name)).toEqual(["pl-0"]);
  expect(now.every((m) => m.started)).toBe(true);

  // etcd has no room for a fourth: the answer names a pending learner, and nothing is added.
  const fourth = await memberAddress("pl-4");
  const full = await membership.addLearner(request(fourth));
  expect(!full.ok && [full.code, full.retryAfter]).toEqual(["learner_pending", RETRY_AFTER.learnerPending]);
  expect(memberByPeerUrl(await members(), fourth.peerURL)).toBeUndefined();

  // Promotions back to back: each one as soon as its learner is in sync.
  const promoting = new Membership({ gateway, admissionStatus: async () => ({ active: true }), holdMs: 30_000 });
  for (const [i, joiner] of joiners.entries()) {
    const promoted = await promoting.promote(request(joiner));
    if (!promoted.ok) throw new Error(`${joiner.name}: ${promoted.code} ${promoted.detail}`);
    expect(promoted.value.memberID).toBe(added[i]!.memberID);
  }
  now = await members();
  expect(now.filter((m) => m.isLearner)).toEqual([]);
  expect(now.map((m) => m.name).sort()).toEqual(["pl-0", "pl-1", "pl-2", "pl-3"]);
  for (const p of etcd.processes) expect(await gateway.health(p.clientURL)).toBe(true);
  expect(lines.filter((l) => l.startsWith("added learner"))).toHaveLength(3);
}, 180_000);
