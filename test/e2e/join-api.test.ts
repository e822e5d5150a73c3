/**
 * The reference join API (`join-broker controller`, as a real process) against a real broker
 * (wrangler dev) and a real etcd cluster on loopback ports (the version under test: test/support/etcd.ts).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { SignJWT, UnsecuredJWT, base64url, decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdGateway, memberByPeerUrl, type EtcdMember } from "../../src/node/etcd/gateway.ts";
import { BIN, ROOT, brokerClient, startBroker, startJoinApiProcess, type BrokerProcess } from "../support/stack.ts";
import { closedEndpoint, memberAddress, startSingleNodeEtcd, type MemberAddress, type TestEtcd } from "../support/etcd.ts";
import { memberIdHex } from "../../src/shared/protocol/member-id.ts";

const CLUSTER = "join-api-e2e";

let broker: BrokerProcess;
let etcd: TestEtcd;
let gateway: EtcdGateway;
let enrollment: string;
let dead: Awaited<ReturnType<typeof closedEndpoint>>;
let joinApi: { url: string; child: ChildProcess; output: () => string };

interface Admission {
  node: string;
  peerURL: string;
  ticket: string;
  token: string;
  jti: string;
}

async function admit(address: MemberAddress): Promise<Admission> {
  const { body } = await brokerClient(broker, { bearer: enrollment }).cluster(CLUSTER).requestTicket(address.name, address.peerURL);
  if (body.state !== "admitted" || body.role !== "join" || !body.admission) throw new Error(`expected an admitted join ticket, got ${JSON.stringify(body)}`);
  return { node: address.name, peerURL: address.peerURL, ticket: body.ticket, token: body.admission, jti: String(decodeJwt(body.admission).jti) };
}

async function call(path: string, token: string | null, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${joinApi.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    body: typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
}

const addMember = (a: { node: string; peerURL: string; token: string }) => call("/v1beta1/etcd/members", a.token, { node: a.node, peerAddress: a.peerURL });
const promote = (a: { node: string; token: string }) => call("/v1beta1/etcd/members/promote", a.token, { node: a.node });

async function members(): Promise<EtcdMember[]> {
  const list = await gateway.memberList();
  if (!list.ok) throw new Error(`member list failed: ${list.error.message}`);
  return list.value.members.sort((a, b) => a.id.localeCompare(b.id));
}

/** Calls until 200, honouring Retry-After; every other answer on the way must be a 503 with Retry-After. */
async function until200(attempt: () => ReturnType<typeof call>, budgetMs = 60_000) {
  const deadline = Date.now() + budgetMs;
  const seen: string[] = [];
  for (let i = 0; i < 200 && Date.now() < deadline; i++) {
    const r = await attempt();
    if (r.status === 200) return { reply: r, seen };
    expect(r.status, JSON.stringify(r.body)).toBe(503);
    expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    seen.push(r.body.code);
    await new Promise((ok) => setTimeout(ok, Math.min(Number(r.headers.get("retry-after")) * 1000, 1_000)));
  }
  throw new Error(`no 200 within ${budgetMs} ms; saw ${seen.join(", ")}`);
}

async function startController(etcdEndpoints: string): Promise<typeof joinApi> {
  const started = await startJoinApiProcess({ broker: broker.url, cluster: CLUSTER, etcd: [etcdEndpoints], args: ["--etcd-timeout", "5", "--hold", "1"] });
  return { url: started.url, child: started.proc, output: started.output };
}

beforeAll(async () => {
  [broker, etcd] = await Promise.all([startBroker(), startSingleNodeEtcd({ name: "ctrl-0" })]);
  // A dead endpoint first: every call must fail over to the live one.
  dead = await closedEndpoint();
  gateway = new EtcdGateway([etcd.first.clientURL]);
  const admin = brokerClient(broker).admin(CLUSTER);
  enrollment = (await admin.createEnrollmentToken()).body.token;
  // The etcd cluster exists already: tell the broker, so it never hands out a bootstrap ticket.
  await admin.adopt([{ node: "ctrl-0", peerURL: etcd.first.peerURL }]);
  // Two in flight so that a second node holds a live admission while the first one's learner is pending.
  await admin.setPolicy({ maxInFlight: 2, leaseSeconds: 900 });
  joinApi = await startController(`${dead.url},${etcd.first.clientURL}`);
});

afterAll(async () => {
  if (joinApi?.child.exitCode === null) {
    joinApi.child.kill("SIGKILL");
  }
  await Promise.all([etcd?.cleanup(), broker?.stop(), dead?.close()]);
});

describe(`join API against etcd ${process.env.E2E_ETCD_VERSION ?? "3.4"}`, () => {
  it("fetches the cluster's public keys when it starts, not at the first token", async () => {
    await expect.poll(() => joinApi.output(), { timeout: 10_000 }).toContain(`fetched cluster ${CLUSTER}'s public keys from the broker`);
  });

  let a1: Admission;
  let a2: Admission;
  let a4: Admission;
  let ctrl1: MemberAddress;
  let ctrl4: MemberAddress;
  let ctrl2: MemberAddress;
  let learnerID: string;
  let initialCluster: string[];

  it("refuses a forged token, a missing token and a bad body, and adds nothing", async () => {
    ctrl1 = await memberAddress("ctrl-1");
    ctrl2 = await memberAddress("ctrl-2");
    const before = await members();
    const claims = {
      iss: new URL(broker.url).origin,
      aud: `etcd-join:${CLUSTER}`,
      sub: "ctrl-1",
      jti: "adm_forged",
      cluster: CLUSTER,
      ticket: "tkt_forged",
      peer_url: ctrl1.peerURL,
      role: "join",
    };
    const now = Math.floor(Date.now() / 1000);
    const none = new UnsecuredJWT({ ...claims, iat: now, nbf: now, exp: now + 600 }).encode();
    const jwks = (await brokerClient(broker).cluster(CLUSTER).jwks()).body as { keys: { kid: string; x: string }[] };
    const hs256 = await new SignJWT({ ...claims, iat: now, nbf: now, exp: now + 600 })
      .setProtectedHeader({ alg: "HS256", kid: jwks.keys[0]!.kid, typ: "admission+jwt" })
      .sign(base64url.decode(jwks.keys[0]!.x));

    for (const token of [none, hs256]) {
      const r = await addMember({ node: "ctrl-1", peerURL: ctrl1.peerURL, token });
      expect(r.status).toBe(401);
      expect(r.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(r.body.code).toBe("invalid_token");
    }
    const missing = await call("/v1beta1/etcd/members", null, { node: "ctrl-1", peerAddress: ctrl1.peerURL });
    expect([missing.status, missing.body.code]).toEqual([401, "unauthorized"]);
    const unknownField = await call("/v1beta1/etcd/members", none, { node: "ctrl-1", peerAddress: ctrl1.peerURL, extra: 1 });
    expect([unknownField.status, unknownField.body.code]).toEqual([400, "invalid_request"]);
    const badPeer = await call("/v1beta1/etcd/members", none, { node: "ctrl-1", peerAddress: "http://10.0.0.1:2380/path" });
    expect([badPeer.status, badPeer.body.code]).toEqual([400, "invalid_peer_url"]);
    for (const peerAddress of [
      "http://0177.0.0.1:2380",
      "http://2130706433:2380",
      "http://127.0.0.1:02380",
      " http://127.0.0.1:2380",
      "http:/127.0.0.1:2380",
    ]) {
      const lenient = await call("/v1beta1/etcd/members", none, { node: "ctrl-1", peerAddress });
      expect({ peerAddress, status: lenient.status, code: lenient.body.code }).toEqual({ peerAddress, status: 400, code: "invalid_peer_url" });
    }
    const notUtf8 = await call("/v1beta1/etcd/members", none, Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]));
    expect([notUtf8.status, notUtf8.body.code]).toEqual([400, "malformed_json"]);
    const notJson = await call("/v1beta1/etcd/members", none, "{not json");
    expect([notJson.status, notJson.body.code]).toEqual([400, "malformed_json"]);
    const tooBig = await call("/v1beta1/etcd/members", none, JSON.stringify({ node: "x".repeat(20_000) }));
    expect([tooBig.status, tooBig.body.code]).toEqual([413, "body_too_large"]);
    const wrongType = await call("/v1beta1/etcd/members", none, "node=ctrl-1", { "content-type": "application/x-www-form-urlencoded" });
    expect([wrongType.status, wrongType.body.code]).toEqual([415, "unsupported_media_type"]);
    expect(await members()).toEqual(before);
  });

  it("refuses a broker-issued token that is bound to another node or peer, adding nothing", async () => {
    a1 = await admit(ctrl1);
    const before = await members();
    const otherNode = await addMember({ ...a1, node: "ctrl-9" });
    expect([otherNode.status, otherNode.body.code]).toEqual([403, "wrong_node"]);
    const otherPeer = await addMember({ ...a1, peerURL: ctrl2.peerURL });
    expect([otherPeer.status, otherPeer.body.code]).toEqual([403, "wrong_peer_url"]);
    expect(await members()).toEqual(before);
  });

  it("adds the node as a learner with a valid token", async () => {
    const r = await addMember(a1);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({ memberID: expect.stringMatching(/^\d+$/), learner: true, initialCluster: expect.any(Array), started: false });
    expect([...r.body.initialCluster].sort()).toEqual([`ctrl-0=${etcd.first.peerURL}`, `ctrl-1=${ctrl1.peerURL}`]);
    learnerID = r.body.memberID;
    initialCluster = r.body.initialCluster;
    const learner = memberByPeerUrl(await members(), ctrl1.peerURL);
    expect(learner).toMatchObject({ id: learnerID, isLearner: true, started: false });
  });

  it("returns the same member when the same call comes again", async () => {
    const before = await members();
    const again = await addMember(a1);
    expect(again.status).toBe(200);
    expect(again.body.memberID).toBe(learnerID);
    expect(again.body.learner).toBe(true);
    expect(await members()).toEqual(before);
  });

  it("answers 503 + Retry-After to a second node while the learner is pending", async () => {
    a2 = await admit(ctrl2);
    const before = await members();
    const r = await addMember(a2);
    expect(r.status).toBe(503);
    // Not started yet: nothing is added until it has (its etcd checks the member list it was given).
    expect(r.body.code).toBe("learner_not_started");
    expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await members()).toEqual(before);
  });

  it("answers 503 + Retry-After to promote before the learner runs", async () => {
    const r = await promote(a1);
    expect(r.status).toBe(503);
    expect(r.body.code).toBe("learner_not_started");
    expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(memberByPeerUrl(await members(), ctrl1.peerURL)?.isLearner).toBe(true);
  });

  it("promotes the learner to a voter once it runs and is in sync", async () => {
    await etcd.startMember(ctrl1, initialCluster);
    const { reply } = await until200(() => promote(a1));
    expect(reply.body).toEqual({ memberID: learnerID, learner: false });
    const member = memberByPeerUrl(await members(), ctrl1.peerURL);
    expect(member).toMatchObject({ id: learnerID, name: "ctrl-1", isLearner: false, started: true });
    // Asking again changes nothing and says the same.
    const again = await promote(a1);
    expect([again.status, again.body.learner]).toEqual([200, false]);
  });

  it("adds nothing for a revoked token", async () => {
    const revoked = await brokerClient(broker).admin(CLUSTER).revokeAdmission(a2.jti, "test");
    expect(revoked.status).toBe(200);
    const before = await members();
    const r = await addMember(a2);
    expect([r.status, r.body.code]).toEqual([410, "admission_revoked"]);
    expect(await members()).toEqual(before);
  });

  it("removes an unstarted learner whose admission ended before adding the next node", async () => {
    // ctrl-1 reports completion, which frees its slot at the broker.
    const done = await brokerClient(broker, { bearer: a1.token }).cluster(CLUSTER).complete(a1.ticket, learnerID);
    expect(done.status).toBe(200);
    // A completed token may still ask about its (voter) member, and may not add anything else.
    expect((await promote(a1)).status).toBe(200);

    const ctrl3 = await memberAddress("ctrl-3");
    const a3 = await admit(ctrl3);
    // Right after a promotion etcd may refuse changes for 5 s ("unhealthy cluster"): that is a 503 too.
    const added3 = await until200(() => addMember(a3));
    const learner3 = added3.reply.body.memberID as string;
    expect(added3.reply.body.initialCluster).toHaveLength(3);

    ctrl4 = await memberAddress("ctrl-4");
    a4 = await admit(ctrl4);
    const blocked = await addMember(a4);
    expect([blocked.status, blocked.body.code]).toEqual([503, "learner_not_started"]);

    // ctrl-3 never starts; an admin revokes it. The next add reaps its learner first.
    expect((await brokerClient(broker).admin(CLUSTER).revokeAdmission(a3.jti, "never started")).status).toBe(200);
    const added4 = await until200(() => addMember(a4));
    const after = await members();
    expect(after.find((m) => m.id === learner3)).toBeUndefined();
    expect(memberByPeerUrl(after, ctrl4.peerURL)).toMatchObject({ id: added4.reply.body.memberID, isLearner: true, started: false });
    expect(
      after
        .filter((m) => !m.isLearner)
        .map((m) => m.name)
        .sort(),
    ).toEqual(["ctrl-0", "ctrl-1"]);
    expect(joinApi.output()).toContain(`removed unstarted learner ${memberIdHex(learner3)}`);
  });

  it("removes a started learner whose admission ended, but never one whose node reported completion", async () => {
    // ctrl-4's learner (added above, admission still active) starts and waits for promotion.
    const again4 = await addMember(a4);
    expect(again4.status).toBe(200);
    const learner4 = again4.body.memberID as string;
    await etcd.startMember(ctrl4, again4.body.initialCluster);
    expect(memberByPeerUrl(await members(), ctrl4.peerURL)).toMatchObject({ id: learner4, isLearner: true, started: true });
    // Asked again once it ran, the join API says so: a node with an empty data dir must not start a member that ran.
    const ran4 = await addMember(a4);
    expect([ran4.status, ran4.body.memberID, ran4.body.learner, ran4.body.started]).toEqual([200, learner4, true, true]);

    // Its admission is active: the next node waits.
    const ctrl5 = await memberAddress("ctrl-5");
    const a5 = await admit(ctrl5);
    const pending = await addMember(a5);
    expect([pending.status, pending.body.code]).toEqual([503, "learner_pending"]);

    // Its admission ends (revoked here; an expired lease is the same): the running learner no
    // longer blocks the cluster's joins. It never counted toward quorum, so removing it is safe.
    expect((await brokerClient(broker).admin(CLUSTER).revokeAdmission(a4.jti, "stalled learner")).status).toBe(200);
    const added5 = await until200(() => addMember(a5), 30_000);
    const afterReap = await members();
    expect(afterReap.find((m) => m.id === learner4)).toBeUndefined();
    expect(memberByPeerUrl(afterReap, ctrl5.peerURL)).toMatchObject({ id: added5.reply.body.memberID, isLearner: true });
    expect(joinApi.output()).toContain(`removed started learner ${memberIdHex(learner4)}`);

    // ctrl-5 starts and reports completion without being promoted: its learner stays, because a
    // completed admission means its node counts it as a voter (its promotion may be under way).
    await etcd.startMember(ctrl5, added5.reply.body.initialCluster);
    const done = await brokerClient(broker, { bearer: a5.token }).cluster(CLUSTER).complete(a5.ticket, added5.reply.body.memberID);
    expect(done.status).toBe(200);
    const ctrl6 = await memberAddress("ctrl-6");
    const a6 = await admit(ctrl6);
    for (let i = 0; i < 2; i++) {
      const held = await addMember(a6);
      expect([held.status, held.body.code]).toEqual([503, "learner_pending"]);
    }
    expect(memberByPeerUrl(await members(), ctrl5.peerURL)).toMatchObject({ id: added5.reply.body.memberID, isLearner: true, started: true });
    // Once promoted (here by hand), the next node is added.
    for (let i = 0; i < 60; i++) {
      if ((await gateway.memberPromote(added5.reply.body.memberID)).ok) break;
      await new Promise((ok) => setTimeout(ok, 500));
    }
    const added6 = await until200(() => addMember(a6), 30_000);
    expect(memberByPeerUrl(await members(), ctrl6.peerURL)).toMatchObject({ id: added6.reply.body.memberID, isLearner: true });
    expect(memberByPeerUrl(await members(), ctrl5.peerURL)).toMatchObject({ isLearner: false });
  });

  it("reports etcd's health and stops cleanly on SIGTERM", async () => {
    const health = await fetch(`${joinApi.url}/healthz`);
    expect(health.status).toBe(200);
    expect(((await health.json()) as { etcd: { clusterId: string } }).etcd.clusterId).toMatch(/^\d+$/);
    const exited = new Promise<number | null>((ok) => joinApi.child.once("exit", (code) => ok(code)));
    joinApi.child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });
});

describe("join-broker controller command line", () => {
  const cli = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((ok) => {
      const child = spawn(process.execPath, [BIN, "controller", ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
      child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
      child.once("close", (code) => ok({ code, stdout, stderr }));
    });

  it("prints its usage with --help", async () => {
    const r = await cli(["--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("join-broker controller --etcd URL[,URL…] --broker URL --cluster NAME --listen HOST:PORT");
  });

  it("exits 2 on bad usage", async () => {
    expect((await cli(["--broker", "http://127.0.0.1:1", "--cluster", "c"])).code).toBe(2);
    const r = await cli(["--etcd", "http://127.0.0.1:1", "--broker", "http://127.0.0.1:1", "--cluster", "c", "--listen", "nope"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--listen");
  });
});
