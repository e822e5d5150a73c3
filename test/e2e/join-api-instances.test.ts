/**
 * Several reference join API instances (one per controller, each with its own memory) over one
 * etcd 3.6 started with `--max-learners 2`: each adds a learner, and neither takes the other's for
 * a stranger to reap, however short its grace period; the broker's word on the admission decides.
 *
 * Runs on $E2E_ETCD_VERSION when that is 3.6 or later, else on 3.6.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { memberByPeerUrl, type EtcdGateway, type EtcdMember } from "../../src/node/etcd/gateway.ts";
import { Membership, type AdmissionStatus } from "../../src/node/join-api/members.ts";
import { learnerRecordKey, memberRecordKey, revokedKey } from "../../src/node/join-api/learner-records.ts";
import { CertificateLedger } from "../../src/node/join-api/ledger.ts";
import { certificateAuthority } from "../../src/node/pki/pki-dir.ts";
import { MULTI_LEARNER_VERSION as VERSION, memberAddress, startMultiLearnerEtcd, type MemberAddress, type TestEtcd } from "../support/etcd.ts";

let etcd: TestEtcd;
let gateway: EtcdGateway;
let members: () => Promise<EtcdMember[]>;

beforeAll(async () => {
  ({ etcd, gateway, members } = await startMultiLearnerEtcd("in-0", 2));
}, 600_000);

afterAll(async () => etcd?.cleanup());

it(`two join API instances with maxInFlight 2 on etcd ${VERSION}: neither reaps the learner the other added`, async () => {
  // The broker, as both instances see it: every admission active until the test ends one.
  const statuses = new Map<string, AdmissionStatus>();
  const admissionStatus = async (token: string) => statuses.get(token) ?? ({ active: true } as const);
  const lines: string[] = [];
  // No grace at all: a learner either instance took for unknown would go at its next add.
  const instance = (name: string) => new Membership({ gateway, admissionStatus, unknownLearnerGraceMs: 0, holdMs: 0, log: (l) => lines.push(`${name}: ${l}`) });
  const [a, b] = [instance("a"), instance("b")];
  const request = (m: MemberAddress) => ({ node: m.name, peerURL: m.peerURL, jti: `adm_${m.name}`, token: `t_${m.name}` });
  const [a1, b1, a2] = await Promise.all(["in-a1", "in-b1", "in-a2"].map((n) => memberAddress(n)));

  // The serials of the certificates signed beside each add ride on its learner's record.
  const serials = (name: string) =>
    [1, 2].map((i) => ({ serial: `${Buffer.from(name).toString("hex")}0${i}`, notAfter: Date.now() + 86_400_000, jti: `adm_${name}` }));
  const addedA = await a.addLearner({ ...request(a1), certificates: serials("in-a1") });
  if (!addedA.ok) throw new Error(`${addedA.code} ${addedA.detail}`);
  await etcd.startMember(a1, addedA.value.initialCluster);
  const addedB = await b.addLearner({ ...request(b1), certificates: serials("in-b1") });
  if (!addedB.ok) throw new Error(`${addedB.code} ${addedB.detail}`);
  await etcd.startMember(b1, addedB.value.initialCluster);

  // Both learners are there, started, and each instance's next add leaves the other's alone.
  const learners = () =>
    members().then((ms) =>
      ms
        .filter((m) => m.isLearner)
        .map((m) => m.id)
        .sort(),
    );
  expect(await learners()).toEqual([addedA.value.memberID, addedB.value.memberID].sort());
  const full = await a.addLearner(request(a2));
  expect(!full.ok && full.code).toBe("learner_pending");
  const fullToo = await b.addLearner(request(a2));
  expect(!fullToo.ok && fullToo.code).toBe("learner_pending");
  expect(await learners()).toEqual([addedA.value.memberID, addedB.value.memberID].sort());
  expect(lines.filter((l) => l.includes("removed"))).toEqual([]);

  // What decides is the broker: once b1's admission has ended, instance a removes b1's learner.
  statuses.set("t_in-b1", { active: false, reason: "revoked" });
  const added2 = await a.addLearner(request(a2));
  if (!added2.ok) throw new Error(`${added2.code} ${added2.detail}`);
  expect(memberByPeerUrl(await members(), b1.peerURL)).toBeUndefined();
  expect(lines).toContainEqual(expect.stringContaining(`a: removed started learner`));
  expect(lines.find((l) => l.startsWith("a: removed"))).toContain("admission adm_in-b1 for node in-b1 is no longer active (revoked)");
  const record = await gateway.get(learnerRecordKey(b1.peerURL));
  expect(record.ok && record.value).toBeNull();
  // Its certificates went onto the revocation list in the removal's write.
  for (const { serial } of serials("in-b1")) {
    const revoked = await gateway.get(revokedKey(serial));
    expect(revoked.ok && revoked.value && JSON.parse(revoked.value)).toMatchObject({ serial, node: "in-b1" });
  }

  // A promotion, through any instance, writes nothing to etcd: the node is not kept waiting for
  // its record's removal. The next add takes it away with its own record, in one transaction.
  const revision = async () => {
    const s = await gateway.status();
    if (!s.ok) throw new Error(s.error.message);
    return Number(s.value.header.revision);
  };
  const promoting = new Membership({ gateway, admissionStatus, holdMs: 30_000 });
  const beforePromote = await revision();
  const promoted = await promoting.promote(request(a1));
  if (!promoted.ok) throw new Error(`${promoted.code} ${promoted.detail}`);
  expect(await revision()).toBe(beforePromote);
  await etcd.startMember(a2, added2.value.initialCluster);
  const b2 = await memberAddress("in-b2");
  const beforeAdd = await revision();
  const addedB2 = await new Membership({ gateway, admissionStatus, holdMs: 30_000 }).addLearner(request(b2));
  if (!addedB2.ok) throw new Error(`${addedB2.code} ${addedB2.detail}`);
  expect(await revision()).toBe(beforeAdd + 1);
  const left = await gateway.get(learnerRecordKey(a1.peerURL));
  expect(left.ok && left.value).toBeNull();
  // In that transaction the promoted learner's record became its member's, certificates and all.
  const memberRecord = await gateway.get(memberRecordKey(addedA.value.memberID));
  expect(memberRecord.ok && memberRecord.value && JSON.parse(memberRecord.value)).toMatchObject({
    node: "in-a1",
    memberID: addedA.value.memberID,
    certificates: serials("in-a1").map((e) => ({ serial: e.serial })),
  });
  const kept = await gateway.get(learnerRecordKey(a2.peerURL));
  expect(kept.ok && kept.value && JSON.parse(kept.value)).toMatchObject({ node: "in-a2", jti: "adm_in-a2", memberID: added2.value.memberID });
  const written = await gateway.get(learnerRecordKey(b2.peerURL));
  expect(written.ok && written.value && JSON.parse(written.value)).toMatchObject({ node: "in-b2", jti: "adm_in-b2", memberID: addedB2.value.memberID });
}, 180_000);

it(`an instance that added a learner under an admission since superseded leaves it to the newer one, recorded by another instance`, async () => {
  // Out of the way first: the learners the test before left.
  for (const m of (await members()).filter((x) => x.isLearner)) expect((await gateway.memberRemove(m.id)).ok).toBe(true);
  const statuses = new Map<string, AdmissionStatus>();
  const admissionStatus = async (token: string) => statuses.get(token) ?? ({ active: true } as const);
  const lines: string[] = [];
  const instance = (name: string) => new Membership({ gateway, admissionStatus, unknownLearnerGraceMs: 0, holdMs: 0, log: (l) => lines.push(`${name}: ${l}`) });
  const [a, b] = [instance("a"), instance("b")];
  const [n, m] = await Promise.all(["in-n", "in-m"].map((x) => memberAddress(x)));

  // Instance a adds node n's learner under its first admission, which then ends; the broker
  // admits n again and n's next ask reaches instance b, which records the newer admission.
  const first = await a.addLearner({ node: "in-n", peerURL: n.peerURL, jti: "adm_n1", token: "t_n1" });
  if (!first.ok) throw new Error(`${first.code} ${first.detail}`);
  await etcd.startMember(n, first.value.initialCluster);
  statuses.set("t_n1", { active: false, reason: "expired" });
  const again = await b.addLearner({ node: "in-n", peerURL: n.peerURL, jti: "adm_n2", token: "t_n2" });
  expect(again.ok && again.value.memberID).toBe(first.value.memberID);

  // Instance a, which remembers only the ended admission, asks etcd's record before it reaps: the
  // newer admission is active, so n's learner stays, and m is added beside it.
  const added = await a.addLearner({ node: "in-m", peerURL: m.peerURL, jti: "adm_m", token: "t_m" });
  if (!added.ok) throw new Error(`${added.code} ${added.detail}`);
  expect(memberByPeerUrl(await members(), n.peerURL)?.id).toBe(first.value.memberID);
  expect(lines.filter((l) => l.includes("removed"))).toEqual([]);
}, 120_000);

it(`the revocation sweep reads a promoted learner's record as its member's: kept while etcd lists the member, revoked once it is gone, though the broker cannot say`, async () => {
  for (const m of (await members()).filter((x) => x.isLearner)) expect((await gateway.memberRemove(m.id)).ok).toBe(true);
  const membership = new Membership({ gateway, admissionStatus: async () => ({ active: true }), holdMs: 30_000 });
  const x = await memberAddress("in-x");
  const certificates = [{ serial: "c0ffee01", notAfter: Date.now() + 86_400_000, jti: "adm_x" }];
  const added = await membership.addLearner({ node: "in-x", peerURL: x.peerURL, jti: "adm_x", token: "t_x", certificates });
  if (!added.ok) throw new Error(`${added.code} ${added.detail}`);
  await etcd.startMember(x, added.value.initialCluster);
  const promoted = await membership.promote({ node: "in-x", peerURL: x.peerURL, jti: "adm_x", token: "t_x" });
  if (!promoted.ok) throw new Error(`${promoted.code} ${promoted.detail}`);

  // No add since: the learner's record, naming the member, is all etcd holds of its certificates.
  const record = await gateway.get(learnerRecordKey(x.peerURL));
  expect(record.ok && record.value && JSON.parse(record.value)).toMatchObject({ memberID: added.value.memberID, certificates: [{ serial: "c0ffee01" }] });
  const { ca } = await certificateAuthority(mkdtempSync(join(tmpdir(), "join-broker-ledger-ca-")), { create: { commonName: "ledger test CA" } });
  // A broker that cannot answer: only etcd's member list decides.
  const ledger = new CertificateLedger({ gateway, membership, ca, admissionStatus: async () => null });
  await ledger.sweep();
  expect(ledger.current?.serials).not.toContain("c0ffee01");
  const kept = await gateway.get(revokedKey("c0ffee01"));
  expect(kept.ok && kept.value).toBeNull();

  // etcd refuses the change until its leader has seen the new voter for 5 s.
  const until = Date.now() + 20_000;
  let removed = await gateway.memberRemove(added.value.memberID);
  while (!removed.ok && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 250));
    removed = await gateway.memberRemove(added.value.memberID);
  }
  expect(removed.ok, removed.ok ? "" : removed.error.message).toBe(true);
  await ledger.sweep();
  expect(ledger.current?.serials).toContain("c0ffee01");
  const revoked = await gateway.get(revokedKey("c0ffee01"));
  expect(revoked.ok && revoked.value && JSON.parse(revoked.value)).toMatchObject({ serial: "c0ffee01", node: "in-x" });
  const gone = await gateway.get(learnerRecordKey(x.peerURL));
  expect(gone.ok && gone.value).toBeNull();
}, 120_000);

it(`the revocation sweep deletes a record only as it read it: an add that rewrites the record meanwhile keeps it`, async () => {
  const { peerURL } = await memberAddress("in-race");
  const key = learnerRecordKey(peerURL);
  const notAfter = Date.now() + 86_400_000;
  // Written after its member's add, for a member etcd no longer lists: the sweep deletes it and revokes 0dd01.
  const stale = {
    node: "in-race",
    peerURL,
    jti: "adm_old",
    token: "t_old",
    memberID: "deadbeef",
    certificates: [{ serial: "0dd01", notAfter, jti: "adm_old" }],
  };
  // The next add's record for that peer URL, under an admission the broker still holds.
  const fresh = { node: "in-race", peerURL, jti: "adm_new", token: "t_new", certificates: [{ serial: "0dd02", notAfter, jti: "adm_new" }] };
  expect((await gateway.put(key, JSON.stringify(stale))).ok).toBe(true);
  const admissionStatus = async (token: string): Promise<AdmissionStatus> => (token === "t_new" ? { active: true } : { active: false, reason: "expired" });
  const membership = new Membership({ gateway, admissionStatus, holdMs: 0 });
  const { ca } = await certificateAuthority(mkdtempSync(join(tmpdir(), "join-broker-ledger-ca-")), { create: { commonName: "ledger race CA" } });
  // The add writes between the sweep's read of the records and its write: the sweep reads the
  // member list in between, so that is where this gateway lets the add in.
  let raced = false;
  const racing = {
    range: (prefix: string) => gateway.range(prefix),
    txn: (...args: Parameters<EtcdGateway["txn"]>) => gateway.txn(...args),
    memberList: async () => {
      if (!raced) {
        raced = true;
        expect((await gateway.put(key, JSON.stringify(fresh))).ok).toBe(true);
      }
      return gateway.memberList();
    },
  } as unknown as EtcdGateway;
  const lines: string[] = [];
  const ledger = new CertificateLedger({ gateway: racing, membership, ca, admissionStatus, log: (l) => lines.push(l) });
  await ledger.sweep();
  expect(raced).toBe(true);
  const kept = await gateway.get(key);
  expect(kept.ok && kept.value && JSON.parse(kept.value)).toMatchObject({ jti: "adm_new", certificates: [{ serial: "0dd02" }] });
  expect(lines.join("\n")).toMatch(/a record changed while it was read/);
  // The next sweep reads the add's record: its admission holds, so it stays, and nothing of it is revoked.
  await ledger.sweep();
  const still = await gateway.get(key);
  expect(still.ok && still.value && JSON.parse(still.value)).toMatchObject({ jti: "adm_new" });
  expect(ledger.current?.serials).not.toContain("0dd02");
  const revokedFresh = await gateway.get(revokedKey("0dd02"));
  expect(revokedFresh.ok && revokedFresh.value).toBeNull();
  await gateway.delete(key);
}, 60_000);

it(`an add whose learner record etcd does not write gives its node no certificates (503), and the node's next ask records the learner it finds`, async () => {
  for (const m of (await members()).filter((x) => x.isLearner)) expect((await gateway.memberRemove(m.id)).ok).toBe(true);
  // etcd itself, except that its transactions (the record's one write) fail as an unreachable etcd's do.
  let writes = "failing" as "failing" | "working";
  const failing = new Proxy(gateway, {
    get(target, prop) {
      if (prop === "txn" && writes === "failing")
        return async () => ({ ok: false, error: { kind: "unavailable", message: "connection refused", httpStatus: 0 } });
      const value = Reflect.get(target, prop);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const lines: string[] = [];
  const membership = new Membership({ gateway: failing, admissionStatus: async () => ({ active: true }), holdMs: 0, log: (l) => lines.push(l) });
  const node = await memberAddress("in-rec");
  const ask = (serial: string) => ({
    node: "in-rec",
    peerURL: node.peerURL,
    jti: "adm_rec",
    token: "t_rec",
    certificates: [{ serial, notAfter: Date.now() + 86_400_000, jti: "adm_rec" }],
  });
  const refused = await membership.addLearner(ask("5ec01"));
  expect(refused.ok ? refused : { status: refused.status, code: refused.code }).toEqual({ status: 503, code: "etcd_unavailable" });
  expect(lines.join("\n")).toMatch(/could not record learner \S+'s admission and certificates in etcd .*its node is asked to come back/);
  // The learner is there, unrecorded: no certificate of it is known to etcd.
  const learner = memberByPeerUrl(await members(), node.peerURL);
  expect(learner?.isLearner).toBe(true);
  const none = await gateway.get(learnerRecordKey(node.peerURL));
  expect(none.ok && none.value).toBeNull();

  writes = "working";
  const again = await membership.addLearner(ask("5ec02"));
  if (!again.ok) throw new Error(`${again.code} ${again.detail}`);
  expect(again.value.memberID).toBe(learner?.id);
  const record = await gateway.get(learnerRecordKey(node.peerURL));
  expect(record.ok && record.value && JSON.parse(record.value)).toMatchObject({ memberID: learner?.id, certificates: [{ serial: "5ec02" }] });
  expect((await gateway.memberRemove(learner!.id)).ok).toBe(true);
}, 60_000);
