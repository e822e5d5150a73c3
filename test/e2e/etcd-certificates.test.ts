/**
 * Certificates that mean exactly the admission, on real etcd with TLS (the harness's default):
 * a joiner's certificates cannot change the membership or touch a key (the bootstrap node turned
 * etcd's auth on, and no user has a node's name); reserved names get nothing; keys of the wrong
 * kind are refused; no second set once a member has started; and a revoked node's certificates
 * are refused on the client and the peer port of every etcd within 30 s.
 *
 * Judged by what the world uses: etcd itself, etcdctl (gRPC, as kube-apiserver and operators
 * talk to etcd), curl-like HTTPS requests on the peer port, and requests made by openssl.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdGateway, memberByPeerUrl } from "../../src/node/etcd/gateway.ts";
import { startJoinApi } from "../../src/node/join-api/server.ts";
import { etcdRootPassword } from "../../src/node/pki/etcd-identities.ts";
import { startEtcd, type EtcdProcess } from "../../src/node/etcd/etcd-process.ts";
import { tlsFetch, type TlsFiles } from "../../src/node/etcd/tls-fetch.ts";
import { requestedIdentity } from "../../src/node/pki/identity.ts";
import { certificateAuthority, etcdServingFiles, pkiFiles, requestCertificates } from "../../src/node/pki/pki-dir.ts";
import { certificateFacts, normalSerial, readRevocationList } from "../../src/node/pki/x509.ts";
import { brokerClient } from "../support/stack.ts";
import { ClusterHarness } from "../support/cluster.ts";
import { ensureTool, etcdUnderTest, freePorts, startSingleNodeEtcd } from "../support/etcd.ts";
import { ROOT } from "../support/broker.ts";
import { e2eSeed } from "../support/seeded.ts";

const seed = e2eSeed("etcd-certificates");
/** The bound the docs promise: a revocation reaches every etcd's list within this. */
const REVOCATION_BOUND_MS = 30_000;
let h: ClusterHarness;
let etcdctlBin: string;
const manual: EtcdProcess[] = [];

let minor: string;

beforeAll(async () => {
  minor = (await etcdUnderTest()).minor;
  h = await ClusterHarness.start({ scenario: "etcd-certificates", seed, nodes: ["ctrl-0", "ctrl-1"], broker: { runtime: "serve" } });
  // The etcdctl of the etcd under test (3.5+ are built with theirs), else Debian's.
  const beside = join(dirname(h.etcdBin), "etcdctl");
  etcdctlBin = existsSync(beside) ? beside : await ensureTool("etcdctl");
  h.startAgent("ctrl-0");
  await h.waitFor("ctrl-0 to bootstrap", () => h.joined("ctrl-0"), 120_000);
  h.startAgent("ctrl-1");
  await h.waitFor("ctrl-1 to join", () => h.joined("ctrl-1"), 120_000);
}, 300_000);

afterAll(async () => {
  for (const p of manual) await p.stop().catch(() => {});
  h?.writeTimeline();
  await h?.cleanup();
});

function etcdctl(files: TlsFiles, endpoint: string, args: string[]): Promise<{ ok: boolean; out: string }> {
  return new Promise((resolve) => {
    execFile(
      etcdctlBin,
      [`--endpoints=${endpoint}`, `--cacert=${files.ca}`, `--cert=${files.cert}`, `--key=${files.key}`, "--dial-timeout=3s", "--command-timeout=5s", ...args],
      { env: { ...process.env, ETCDCTL_API: "3" }, timeout: 20_000 },
      (error, stdout, stderr) => resolve({ ok: error === null, out: `${stdout}${stderr}` }),
    );
  });
}

/** A new TLS connection presenting these files: the status etcd answers, or why there was none. */
async function probe(url: string, files: TlsFiles): Promise<number | string> {
  // A fetch of its own (its own connection pool): etcd checks its list on each new connection.
  return tlsFetch(files)(url).then(
    (r) => r.status,
    (e: Error) => e.message,
  );
}

async function members() {
  const list = await h.etcd(h.nodes.map((n) => n.clientURL)).memberList();
  if (!list.ok) throw new Error(list.error.message);
  return list.value.members;
}

async function admit(node: string, peerURL: string): Promise<{ token: string; jti: string }> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { status, body } = await brokerClient(h.broker, { bearer: h.token }).cluster(h.cluster).requestTicket(node, peerURL);
    if (body.state === "admitted" && body.admission) return { token: body.admission, jti: String(decodeJwt(body.admission).jti) };
    if (Date.now() > deadline) throw new Error(`no admission for ${node}: ${status} ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function joinApi(path: string, token: string, body: unknown): Promise<{ status: number; body: Record<string, any>; text: string }> {
  const res = await fetch(`${h.joinApi.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text.startsWith("{") ? JSON.parse(text) : {}, text };
}

/** A node driven by the test: its admission, its ports, its PKI directory. */
interface ManualNode {
  name: string;
  peerURL: string;
  clientURL: string;
  pkiDir: string;
  token: string;
  jti: string;
}

async function manualNode(name: string): Promise<ManualNode> {
  const [peerPort, clientPort] = await freePorts(2);
  const peerURL = `https://127.0.0.1:${peerPort}`;
  const clientURL = `https://127.0.0.1:${clientPort}`;
  const { token, jti } = await admit(name, peerURL);
  return { name, peerURL, clientURL, pkiDir: mkdtempSync(join(tmpdir(), `join-broker-${name}-pki-`)), token, jti };
}

/** Asks the join API to add the node with fresh keys; saves what it signed in the node's PKI directory. */
async function addWithCertificates(n: ManualNode): Promise<{ status: number; body: Record<string, any>; text: string }> {
  const pending = await requestCertificates(requestedIdentity(n.name, n.peerURL, n.clientURL));
  const r = await joinApi("/v1beta1/etcd/members", n.token, { node: n.name, peerAddress: n.peerURL, csrs: pending.requests });
  if (r.status === 200 && r.body.certificates) await pending.save(n.pkiDir, r.body.certificates);
  return r;
}

/** Starts the node's etcd as the agent would: its certificates, the join API's revocation list. */
async function startManualEtcd(n: ManualNode, initialCluster: string[]): Promise<EtcdProcess> {
  const crl = await fetch(`${h.joinApi.url}/v1beta1/etcd/crl`);
  expect(crl.status).toBe(200);
  writeFileSync(pkiFiles(n.pkiDir).crl, new Uint8Array(await crl.arrayBuffer()));
  const etcd = await startEtcd({
    bin: h.etcdBin,
    name: n.name,
    dataDir: join(n.pkiDir, "data"),
    clientURL: n.clientURL,
    peerURL: n.peerURL,
    initialCluster,
    initialClusterState: "existing",
    tls: etcdServingFiles(n.pkiDir, { revocationList: true }),
    waitFor: "none",
    logFile: join(n.pkiDir, "etcd.log"),
  });
  manual.push(etcd);
  await h.waitFor(`${n.name}'s etcd to start`, async () => !!memberByPeerUrl(await members(), n.peerURL)?.started, 60_000);
  return etcd;
}

const peerFiles = (dir: string): TlsFiles => ({ ca: pkiFiles(dir).ca, cert: pkiFiles(dir).peerCert, key: pkiFiles(dir).peerKey });
const serverFiles = (dir: string): TlsFiles => ({ ca: pkiFiles(dir).ca, cert: pkiFiles(dir).serverCert, key: pkiFiles(dir).serverKey });

describe("a joiner's certificates", () => {
  it("can neither add, remove nor promote a member, nor read or write a key: only the member list and status", async () => {
    const ctrl0 = h.node("ctrl-0");
    const ctrl1 = h.node("ctrl-1");
    const before = await members();
    const ctrl0Id = memberByPeerUrl(before, ctrl0.peerURL)!.id;
    // A learner only root can add, for the promotion attempt.
    const [probePort] = await freePorts(1);
    // etcd takes no change for 5 s after ctrl-1's promotion ("unhealthy cluster"): ask until it does.
    let added = await h.etcd(ctrl0.clientURL).memberAdd([`https://127.0.0.1:${probePort}`], { learner: true });
    for (let i = 0; i < 40 && !added.ok && added.error.kind === "unhealthy_cluster"; i++) {
      await new Promise((r) => setTimeout(r, 500));
      added = await h.etcd(ctrl0.clientURL).memberAdd([`https://127.0.0.1:${probePort}`], { learner: true });
    }
    expect(added.ok, added.ok ? "" : added.error.message).toBe(true);
    const learner = added.ok ? added.value.member.id : "";
    try {
      for (const [which, files] of [
        ["peer", peerFiles(ctrl1.pkiDir)],
        ["server", serverFiles(ctrl1.pkiDir)],
      ] as const) {
        const denied = /user name not found|permission denied|user name is empty/;
        const [freePeer] = await freePorts(1);
        const tries = {
          add: await etcdctl(files, ctrl0.clientURL, ["member", "add", "evil", "--learner", `--peer-urls=https://127.0.0.1:${freePeer}`]),
          remove: await etcdctl(files, ctrl0.clientURL, ["member", "remove", BigInt(ctrl0Id).toString(16)]),
          promote: await etcdctl(files, ctrl0.clientURL, ["member", "promote", BigInt(learner).toString(16)]),
          put: await etcdctl(files, ctrl0.clientURL, ["put", "/registry/evil", "1"]),
          putRecords: await etcdctl(files, ctrl0.clientURL, ["put", "/join-broker/revoked/00", "{}"]),
          get: await etcdctl(files, ctrl0.clientURL, ["get", "/", "--prefix", "--keys-only"]),
          userAdd: await etcdctl(files, ctrl0.clientURL, ["user", "add", "evil:evil"]),
        };
        for (const [what, t] of Object.entries(tries)) {
          expect(t.ok, `${which} certificate, ${what}: ${t.out}`).toBe(false);
          expect(t.out, `${which} certificate, ${what}`).toMatch(denied);
        }
        // What it keeps: the member list and the status (etcd answers these to any client it can name),
        // leases (with no key), and on 3.4 compaction (3.4 checks no right for it).
        const list = await etcdctl(files, ctrl0.clientURL, ["member", "list"]);
        expect(list.ok, list.out).toBe(true);
        expect(list.out).toContain("ctrl-1");
        expect((await etcdctl(files, ctrl0.clientURL, ["endpoint", "status"])).ok).toBe(true);
        const lease = await etcdctl(files, ctrl0.clientURL, ["lease", "grant", "5"]);
        expect(lease.ok, lease.out).toBe(true);
        const compact = await etcdctl(files, ctrl0.clientURL, ["compaction", "1"]);
        if (minor === "3.4") expect(compact.out).toMatch(/compacted revision 1|required revision has been compacted/);
        else expect(compact.out).toMatch(denied);
        // The JSON gateway refuses a client certificate that names a user it would ignore.
        const gateway = await tlsFetch(files)(`${ctrl0.clientURL}/v3/cluster/member/add`, {
          method: "POST",
          body: JSON.stringify({ peerURLs: [`https://127.0.0.1:${freePeer}`], isLearner: true }),
        });
        expect(gateway.status).toBe(400);
        expect(await gateway.text()).toMatch(/CommonName/);
      }
      // The peer port's promotion path (a follower forwards promotions there) wants root too.
      const peerPromote = await tlsFetch(peerFiles(ctrl1.pkiDir))(`${ctrl0.peerURL}/members/promote/${learner}`, { method: "POST" });
      expect(peerPromote.status).not.toBe(200);
      // Nothing changed: the same members (and the learner root added).
      expect((await members()).map((m) => m.id).sort()).toEqual([...before.map((m) => m.id), learner].sort());
      expect((await h.etcd(ctrl0.clientURL).get("/registry/evil")).ok && (await h.etcd(ctrl0.clientURL).get("/registry/evil"))).toMatchObject({ value: null });
    } finally {
      await h.etcd(ctrl0.clientURL).memberRemove(learner);
    }
  });

  it("a client certificate without a user gets the member list and nothing else through the gateway either", async () => {
    // The harness's certificate names no user; without root's password it is nobody.
    const r = await tlsFetch(h.etcdClientTls!)(`${h.node("ctrl-0").clientURL}/v3/kv/put`, {
      method: "POST",
      body: JSON.stringify({ key: "eA==", value: "eA==" }),
    });
    expect(r.status).not.toBe(200);
    expect(await r.text()).toMatch(/user name is empty|permission denied/);
  });
});

describe("root's session, shared by calls at once", () => {
  it("a call that went without a token while another signed in asks again with that token: one sign-in, neither call refused", async () => {
    // etcd's answer to a membership change without a token on a client-certificate port is "user
    // name not found" (the gateway's own certificate stands in), to a put "user name is empty".
    const real = tlsFetch(h.etcdClientTls!);
    const paths: string[] = [];
    let release!: () => void;
    const released = new Promise<void>((ok) => (release = ok));
    let held = false;
    const seam: typeof fetch = async (input, init) => {
      const path = new URL(String(input)).pathname;
      const token = (init?.headers as Record<string, string> | undefined)?.authorization;
      paths.push(`${path}${token ? " (token)" : ""}`);
      // The first membership call, sent without a token, reaches etcd only once the other call has signed in.
      if (path === "/v3/cluster/member/remove" && !token && !held) {
        held = true;
        await released;
      }
      if (token) release();
      return real(input, init);
    };
    const gateway = new EtcdGateway(h.node("ctrl-0").clientURL, {
      fetch: seam,
      credentials: { user: "root", password: etcdRootPassword(readFileSync(pkiFiles(h.pkiCaDir!).caKey, "utf8")) },
    });
    const [remove, put] = await Promise.all([gateway.memberRemove("12345"), gateway.put("/registry/join-broker-test/session", "1")]);
    expect(put.ok, JSON.stringify(put)).toBe(true);
    // etcd's own refusal of an unknown member: asked as root, not refused as nobody.
    expect(!remove.ok && remove.error.kind, JSON.stringify(remove)).toBe("member_not_found");
    expect(paths.filter((p) => p.startsWith("/v3/auth/authenticate"))).toHaveLength(1);
  });
});

describe("reserved node names", () => {
  it("root gets no ticket and no add", async () => {
    const [port] = await freePorts(1);
    // Raw: the broker's 400 problem for a bad name is what is tested (the typed client refuses it before sending).
    const ticket = await fetch(`${h.broker.url}/v1/clusters/${h.cluster}/tickets`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.token}`, "content-type": "application/json" },
      body: JSON.stringify({ node: "root", peerURL: `https://127.0.0.1:${port}` }),
    });
    const body = (await ticket.json()) as { code?: string; detail?: string };
    expect(ticket.status).toBe(400);
    expect(body.code).toBe("invalid_node");
    expect(body.detail).toMatch(/reserved/);
    // The join API refuses the name before it looks at any token.
    const add = await joinApi("/v1beta1/etcd/members", "x.y.z", { node: "root", peerAddress: `https://127.0.0.1:${port}` });
    expect(add.status, add.text).toBe(400);
    expect(add.body.code).toBe("invalid_node");
  });
});

describe("keys", () => {
  it("RSA-1024 and P-224 requests are refused (400 invalid_csr, saying why) and nothing is added", async () => {
    const n = await manualNode("weak-1");
    try {
      const openssl = await ensureTool("openssl");
      const csrOf = (keyArgs: string[]) =>
        new Promise<string>((resolve, reject) =>
          execFile(
            openssl,
            ["req", "-new", "-newkey", ...keyArgs, "-nodes", "-keyout", "/dev/null", "-subj", `/CN=${n.name}`, "-addext", "subjectAltName=IP:127.0.0.1"],
            (e, out) => (e ? reject(e) : resolve(out)),
          ),
        );
      const good = await requestCertificates(requestedIdentity(n.name, n.peerURL, n.clientURL));
      const before = await members();
      for (const [what, args, reason] of [
        ["RSA 1024", ["rsa:1024"], /RSA key of 1024 bits/],
        ["P-224", ["ec", "-pkeyopt", "ec_paramgen_curve:P-224"], /another curve/],
      ] as const) {
        const r = await joinApi("/v1beta1/etcd/members", n.token, {
          node: n.name,
          peerAddress: n.peerURL,
          csrs: { peer: await csrOf([...args]), server: good.requests.server },
        });
        expect(r.status, `${what}: ${r.text}`).toBe(400);
        expect(r.body.code).toBe("invalid_csr");
        expect(r.body.detail).toMatch(reason);
        expect(r.text).not.toContain("BEGIN CERTIFICATE");
      }
      expect((await members()).length).toBe(before.length);
    } finally {
      await h.client.admin(h.cluster).revokeAdmission(n.jti, "test done");
    }
  });
});

let voter: ManualNode;
let voterSerials: string[];

describe("a member's certificates are signed once", () => {
  it("again while its learner has not started, never once it has, nor after its promotion", async () => {
    voter = await manualNode("late-1");
    const first = await addWithCertificates(voter);
    expect(first.status, first.text).toBe(200);
    // Its node crashed before the answer, say: it asks again with fresh keys and gets a second set.
    const again = await addWithCertificates(voter);
    expect(again.status, again.text).toBe(200);
    expect(again.body.memberID).toBe(first.body.memberID);
    voterSerials = [pkiFiles(voter.pkiDir).peerCert, pkiFiles(voter.pkiDir).serverCert].map((f) =>
      normalSerial(certificateFacts(readFileSync(f, "utf8")).serial),
    );
    await startManualEtcd(voter, again.body.initialCluster);
    // Started: no third set, and nothing added.
    const started = await addWithCertificates(voter);
    expect(started.status, started.text).toBe(409);
    expect(started.body.code).toBe("certificates_not_reissued");
    expect(started.text).not.toContain("BEGIN CERTIFICATE");
    const promoted = await joinApi("/v1beta1/etcd/members/promote", voter.token, { node: voter.name });
    expect(promoted.status, promoted.text).toBe(200);
    expect(promoted.body.learner).toBe(false);
    // A voter whose admission is still active (it has not reported completion): still none.
    const after = await addWithCertificates(voter);
    expect(after.status, after.text).toBe(409);
    expect(after.body.code).toBe("certificates_not_reissued");
    // Its slot goes to the next node (a real node would report completion instead).
    await h.client.admin(h.cluster).revokeAdmission(voter.jti, "test done");
  }, 120_000);
});

describe("a promote", () => {
  // Only etcd's leader can tell whether a learner is in sync: a follower forwards a promote to it
  // over the peer port, and etcd 3.4 with auth on drops the caller's token on the way. Its leader
  // refuses ("user name is empty") and the follower retries until it answers "request timed
  // out", 7 s later. So the gateway asks the leader first, whatever its endpoints' order.
  it("goes to etcd's leader though the gateway's first endpoint is a follower: one sign-in, the learner a voter", async () => {
    const n = await manualNode("late-2");
    const added = await addWithCertificates(n);
    expect(added.status, added.text).toBe(200);
    await startManualEtcd(n, added.body.initialCluster);
    const urls = h.nodes.map((node) => node.clientURL);
    const views = await Promise.all(urls.map(async (url) => ({ url, status: await h.etcd(url).status(url) })));
    const leader = views.find((v) => v.status.ok && v.status.value.leader === v.status.value.header.memberId)?.url;
    const follower = urls.find((url) => url !== leader);
    expect(leader && follower, JSON.stringify(views)).toBeTruthy();
    const real = tlsFetch(h.etcdClientTls!);
    const asked: string[] = [];
    const seam: typeof fetch = (input, init) => {
      const url = new URL(String(input));
      asked.push(`${url.origin}${url.pathname}`);
      return real(input, init);
    };
    const gateway = new EtcdGateway([follower!, leader!], {
      fetch: seam,
      credentials: { user: "root", password: etcdRootPassword(readFileSync(pkiFiles(h.pkiCaDir!).caKey, "utf8")) },
    });
    const id = memberByPeerUrl(await members(), n.peerURL)!.id;
    // A learner that has just started may not be in sync yet: etcd says so, and it is asked again.
    let promoted: Awaited<ReturnType<EtcdGateway["memberPromote"]>> | undefined;
    await h.waitFor(
      "a promote etcd does not call early",
      async () => {
        promoted = await gateway.memberPromote(id);
        return promoted.ok || promoted.error.kind !== "learner_not_ready";
      },
      60_000,
    );
    expect(promoted?.ok, JSON.stringify(promoted)).toBe(true);
    expect(memberByPeerUrl(await members(), n.peerURL)?.isLearner).toBe(false);
    expect(asked.filter((a) => a.endsWith("/v3/auth/authenticate"))).toHaveLength(1);
    const promotes = asked.filter((a) => a.endsWith("/v3/cluster/member/promote"));
    expect(new Set(promotes)).toEqual(new Set([`${leader}/v3/cluster/member/promote`]));
    await h.client.admin(h.cluster).revokeAdmission(n.jti, "test done");
  }, 120_000);
});

describe("revocation reaches every etcd", () => {
  /** Until every etcd refuses these certificates on its client and its peer port; how long that took. */
  async function untilRefusedEverywhere(dir: string, since: number): Promise<number> {
    const targets = h.nodes.flatMap((n) => [
      { what: `${n.name}'s client port`, url: `${n.clientURL}/health` },
      { what: `${n.name}'s peer port`, url: `${n.peerURL}/version` },
    ]);
    const refused = new Set<string>();
    while (refused.size < targets.length) {
      if (Date.now() - since > REVOCATION_BOUND_MS + 10_000)
        throw new Error(
          `still accepted after ${Math.round((Date.now() - since) / 1000)} s: ${targets
            .filter((t) => !refused.has(t.what))
            .map((t) => t.what)
            .join(", ")}`,
        );
      for (const t of targets) if ((await probe(t.url, peerFiles(dir))) !== 200 && (await probe(t.url, serverFiles(dir))) !== 200) refused.add(t.what);
      await new Promise((r) => setTimeout(r, 250));
    }
    return Date.now() - since;
  }

  it("a member removed from etcd: its certificates are refused on the client and the peer port of every etcd within 30 s", async () => {
    // Every node's etcd reads the list, on both ports.
    for (const n of h.nodes)
      expect(readFileSync(join(n.stateDir, "etcd-flags.txt"), "utf8")).toContain(`--client-crl-file=${pkiFiles(n.pkiDir).crl}\n--peer-crl-file=`);
    // Accepted everywhere first.
    for (const n of h.nodes) {
      expect(await probe(`${n.clientURL}/health`, peerFiles(voter.pkiDir))).toBe(200);
      expect(await probe(`${n.peerURL}/version`, peerFiles(voter.pkiDir))).toBe(200);
    }
    const id = memberByPeerUrl(await members(), voter.peerURL)!.id;
    await manual.find((p) => p.name === voter.name)!.stop();
    // The operator's way: a root certificate from the CA (join-broker etcd-cert), etcdctl member remove.
    const rootDir = mkdtempSync(join(tmpdir(), "join-broker-root-cert-"));
    const made = await new Promise<{ code: number | null; out: string }>((resolve) =>
      execFile(process.execPath, [join(ROOT, "bin/join-broker"), "etcd-cert", "--pki-dir", h.pkiCaDir!, "--out", rootDir], (e, out, err) =>
        resolve({ code: e ? ((e as { code?: number }).code ?? 1) : 0, out: `${out}${err}` }),
      ),
    );
    expect(made.code, made.out).toBe(0);
    expect(made.out).toContain(`--cert=${join(rootDir, "root.crt")}`);
    const root = { ca: join(rootDir, "ca.crt"), cert: join(rootDir, "root.crt"), key: join(rootDir, "root.key") };
    const removedAt = Date.now();
    const removed = await etcdctl(root, h.node("ctrl-0").clientURL, ["member", "remove", BigInt(id).toString(16)]);
    expect(removed.ok, removed.out).toBe(true);
    const took = await untilRefusedEverywhere(voter.pkiDir, removedAt);
    console.log(`[etcd-certificates] a removed member's certificates were refused everywhere ${took} ms after the removal`);
    expect(took).toBeLessThanOrEqual(REVOCATION_BOUND_MS);
    // Every node's list names them, signed by the CA.
    for (const n of h.nodes) {
      const list = await readRevocationList(new Uint8Array(readFileSync(pkiFiles(n.pkiDir).crl)), readFileSync(pkiFiles(n.pkiDir).ca, "utf8"));
      expect(list.serials).toEqual(expect.arrayContaining(voterSerials));
    }
    // etcd said why.
    expect(h.joinApi.output()).toMatch(new RegExp(`revoking node ${voter.name}'s certificates`));
  }, 90_000);

  it("a learner whose admission an admin revokes is removed, and its certificates refused everywhere within 30 s", async () => {
    const n = await manualNode("revoked-1");
    const added = await addWithCertificates(n);
    expect(added.status, added.text).toBe(200);
    await startManualEtcd(n, added.body.initialCluster);
    for (const node of h.nodes) expect(await probe(`${node.peerURL}/version`, peerFiles(n.pkiDir))).toBe(200);
    const revokedAt = Date.now();
    await h.client.admin(h.cluster).revokeAdmission(n.jti, "stolen");
    const took = await untilRefusedEverywhere(n.pkiDir, revokedAt);
    console.log(`[etcd-certificates] a revoked learner's certificates were refused everywhere ${took} ms after the revocation`);
    expect(took).toBeLessThanOrEqual(REVOCATION_BOUND_MS);
    expect(memberByPeerUrl(await members(), n.peerURL)).toBeUndefined();
    // The nodes that joined through the agent are untouched.
    for (const node of h.nodes) expect(await probe(`${node.clientURL}/health`, peerFiles(h.node("ctrl-1").pkiDir))).toBe(200);
  }, 90_000);
});

describe("a cluster bootstrapped before etcd's auth was turned on", () => {
  it("a join API started with --enable-etcd-auth turns it on; a client without a user then gets nothing, root everything", async () => {
    const etcd = await startSingleNodeEtcd({ bin: h.etcdBin });
    const caDir = mkdtempSync(join(tmpdir(), "join-broker-enable-auth-"));
    const logged: string[] = [];
    await certificateAuthority(caDir, { create: { commonName: "enable-auth CA" } });
    const api = await startJoinApi({
      etcd: etcd.first.clientURL,
      pkiDir: caDir,
      enableEtcdAuth: true,
      broker: h.broker.url,
      cluster: h.cluster,
      host: "127.0.0.1",
      port: 0,
      log: (l) => logged.push(l),
    });
    try {
      await expect.poll(() => logged.find((l) => l.startsWith("turned etcd's auth on")) ?? "", { timeout: 20_000 }).toContain("--enable-etcd-auth");
      const anyone = new EtcdGateway(etcd.first.clientURL);
      const put = await anyone.put("/registry/after", "1");
      expect(put.ok ? "written" : put.error.kind).toMatch(/unauthenticated|permission_denied/);
      const root = new EtcdGateway(etcd.first.clientURL, {
        credentials: { user: "root", password: etcdRootPassword(readFileSync(pkiFiles(caDir).caKey, "utf8")) },
      });
      expect((await root.put("/registry/after", "1")).ok).toBe(true);
      // The join API keeps its revocation list on it.
      await expect.poll(async () => (await fetch(`${api.url}/v1beta1/etcd/crl`)).status, { timeout: 15_000 }).toBe(200);
    } finally {
      await api.close();
      await etcd.cleanup();
    }
  });
});
