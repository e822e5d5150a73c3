/**
 * etcd as production runs it: TLS with client-certificate auth on both ports, and the join API
 * as the only issuer of joiners' certificates, for exactly the identity in the admission.
 *
 * A real broker (join-broker serve), real etcd started by the agent with --pki-dir, the join API
 * as a process (the harness's) and, for expiry, in this process with its clock moved.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tlsFetch } from "../../src/node/etcd/tls-fetch.ts";
import { memberByPeerUrl } from "../../src/node/etcd/gateway.ts";
import { startJoinApi, type JoinApiServer } from "../../src/node/join-api/server.ts";
import { certificateAuthority, issueOwnCertificates, ownClientFiles, pkiFiles, requestCertificates } from "../../src/node/pki/pki-dir.ts";
import { certificateFacts, signedBy } from "../../src/node/pki/x509.ts";
import { adminCall } from "../support/broker.ts";
import { ClusterHarness } from "../support/cluster.ts";
import { freePorts } from "../support/etcd.ts";
import { expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { e2eSeed } from "../support/seeded.ts";

const seed = e2eSeed("etcd-tls");
let h: ClusterHarness;

beforeAll(async () => {
  h = await ClusterHarness.start({ scenario: "etcd-tls", seed, nodes: ["ctrl-0", "ctrl-1"], broker: { runtime: "serve" }, faultProxy: true });
  h.startAgent("ctrl-0");
  await h.waitFor("ctrl-0 to bootstrap", () => h.joined("ctrl-0"), 120_000);
}, 180_000);

afterAll(async () => {
  h?.writeTimeline();
  await h?.cleanup();
});

/** An admission for a node that is not run by an agent: the test makes its calls. */
async function admit(node: string, peerURL: string): Promise<{ token: string; jti: string }> {
  const res = await fetch(`${h.broker.url}/v1/clusters/${h.cluster}/tickets`, {
    method: "POST",
    headers: { authorization: `Bearer ${h.token}`, "content-type": "application/json" },
    body: JSON.stringify({ node, peerURL }),
  });
  const body = (await res.json()) as { state: string; role: string; admission: string };
  if (body.state !== "admitted" || body.role !== "join") throw new Error(`expected an admitted join ticket, got ${res.status} ${JSON.stringify(body)}`);
  return { token: body.admission, jti: String(decodeJwt(body.admission).jti) };
}

async function add(joinApiUrl: string, token: string, body: unknown): Promise<{ status: number; body: Record<string, any>; text: string }> {
  const res = await fetch(`${joinApiUrl}/v1beta1/etcd/members`, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : {}, text };
}

async function memberCount(): Promise<number> {
  const list = await h.etcd(h.node("ctrl-0").clientURL).memberList();
  if (!list.ok) throw new Error(list.error.message);
  return list.value.members.length;
}

describe("etcd's ports want a certificate from the cluster's CA", () => {
  it("serves the client port to the harness's certificate, and refuses a client without one or with another CA's", async () => {
    // etcd's own /health: it answers any client its TLS lets in (with auth on, /v3 wants a user).
    const url = `${h.node("ctrl-0").clientURL}/health`;
    const ask = (files: Parameters<typeof tlsFetch>[0]) => tlsFetch(files)(url).then((r) => r.status, (e: Error) => e.message);
    expect(await ask(h.etcdClientTls!)).toBe(200);
    // The right CA trusted, no certificate presented.
    expect(await ask({ ca: h.etcdClientTls!.ca })).not.toBe(200);
    // A certificate from another CA, with the same name and host.
    const other = mkdtempSync(join(tmpdir(), "join-broker-other-ca-"));
    const { ca } = await certificateAuthority(other, { create: { commonName: "another etcd CA" } });
    await issueOwnCertificates(other, ca, { peer: { node: "e2e-harness", hosts: ["127.0.0.1"] }, server: { node: "e2e-harness", hosts: ["127.0.0.1"] } });
    expect(await ask({ ...ownClientFiles(other), ca: h.etcdClientTls!.ca })).not.toBe(200);
    // And plain http on an https port is no way in either.
    expect(await fetch(url.replace("https:", "http:")).then((r) => r.status, () => "refused")).not.toBe(200);
  });

  it("refuses a peer without a certificate on the peer port", async () => {
    const peer = `${h.node("ctrl-0").peerURL}/version`;
    expect(await tlsFetch({ ca: h.etcdClientTls!.ca })(peer).then((r) => r.status, (e: Error) => e.message)).not.toBe(200);
    expect(await tlsFetch(h.etcdClientTls!)(peer).then((r) => r.status)).toBe(200);
  });

  it("the bootstrap node signed its own certificates with the CA the operator put in its --pki-dir", () => {
    const dir = h.node("ctrl-0").pkiDir;
    const facts = certificateFacts(readFileSync(pkiFiles(dir).peerCert, "utf8"));
    expect(facts.commonName).toBe("ctrl-0");
    expect(facts.hosts).toEqual(["127.0.0.1"]);
    expect(readdirSync(dir).sort()).toEqual(["ca.crt", "ca.key", "crl.der", "peer.crt", "peer.key", "server.crt", "server.key"]);
  });
});

describe("the join API signs only for the admitted identity", () => {
  let peerURL: string;
  let admission: { token: string; jti: string };

  beforeAll(async () => {
    const [port] = await freePorts(1);
    peerURL = `https://127.0.0.1:${port}`;
    admission = await admit("lone-1", peerURL);
  });

  it("refuses requests for another peer host, another node name, or that are not requests, and adds nothing", async () => {
    const before = await memberCount();
    const elsewhere = await requestCertificates({ peer: { node: "lone-1", hosts: ["10.9.9.9"] }, server: { node: "lone-1", hosts: ["127.0.0.1"] } });
    const r1 = await add(h.joinApi.url, admission.token, { node: "lone-1", peerAddress: peerURL, csrs: elsewhere.requests });
    expect(r1.status, r1.text).toBe(422);
    expect(r1.body.code).toBe("csr_name_not_allowed");
    expect(r1.body.detail).toContain("10.9.9.9");

    const serverElsewhere = await requestCertificates({ peer: { node: "lone-1", hosts: ["127.0.0.1"] }, server: { node: "lone-1", hosts: ["127.0.0.1", "evil.example"] } });
    const r2 = await add(h.joinApi.url, admission.token, { node: "lone-1", peerAddress: peerURL, csrs: serverElsewhere.requests });
    expect(r2.status, r2.text).toBe(422);
    expect(r2.body.code).toBe("csr_name_not_allowed");

    const otherName = await requestCertificates({ peer: { node: "ctrl-0", hosts: ["127.0.0.1"] }, server: { node: "ctrl-0", hosts: ["127.0.0.1"] } });
    const r3 = await add(h.joinApi.url, admission.token, { node: "lone-1", peerAddress: peerURL, csrs: otherName.requests });
    expect(r3.status, r3.text).toBe(422);
    expect(r3.body.detail).toContain("ctrl-0");

    const r4 = await add(h.joinApi.url, admission.token, { node: "lone-1", peerAddress: peerURL, csrs: { peer: "not a request", server: "nor this" } });
    expect(r4.status, r4.text).toBe(400);
    expect(r4.body.code).toBe("invalid_csr");

    for (const r of [r1, r2, r3, r4]) expect(r.text).not.toContain("CERTIFICATE");
    expect(await memberCount()).toBe(before);
  });

  it("signs the admitted identity: CN = node, peer SAN = exactly the peer host; the answer holds certificates, never a key", async () => {
    const own = await requestCertificates({ peer: { node: "lone-1", hosts: ["127.0.0.1"] }, server: { node: "lone-1", hosts: ["127.0.0.1", "localhost"] } });
    const r = await add(h.joinApi.url, admission.token, { node: "lone-1", peerAddress: peerURL, csrs: own.requests });
    expect(r.status, r.text).toBe(200);
    expect(r.text).not.toMatch(/PRIVATE KEY/);
    const { ca, peer, server } = r.body.certificates as { ca: string; peer: string; server: string };
    expect(ca.trim()).toBe(readFileSync(join(h.pkiCaDir!, "ca.crt"), "utf8").trim());
    expect(await signedBy(peer, ca)).toBe(true);
    expect(certificateFacts(peer)).toMatchObject({ commonName: "lone-1", hosts: ["127.0.0.1"] });
    // DNS names before addresses, as Go writes them.
    expect(certificateFacts(server)).toMatchObject({ commonName: "lone-1", hosts: ["localhost", "127.0.0.1"] });
    // A year by default.
    const days = (certificateFacts(peer).notAfter - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(364);
    expect(days).toBeLessThan(366);
  });

  it("signs nothing for a revoked admission", async () => {
    const revoked = await adminCall(h.broker, "POST", `/v1/admin/clusters/${h.cluster}/admissions/${admission.jti}/revoke`, { reason: "test" });
    expect(revoked.status).toBe(200);
    const before = await memberCount();
    const fresh = await requestCertificates({ peer: { node: "lone-1", hosts: ["127.0.0.1"] }, server: { node: "lone-1", hosts: ["127.0.0.1"] } });
    const r = await add(h.joinApi.url, admission.token, { node: "lone-1", peerAddress: peerURL, csrs: fresh.requests });
    expect(r.status, r.text).toBe(410);
    expect(r.body.code).toBe("admission_revoked");
    expect(r.text).not.toContain("CERTIFICATE");
    expect(await memberCount()).toBeLessThanOrEqual(before);
  });
});

describe("an expired admission", () => {
  let api: JoinApiServer;
  let skewMs = 0;

  beforeAll(async () => {
    // The same CA and etcd as the harness's join API, on a clock the test moves.
    api = await startJoinApi({
      etcd: h.nodes.map((n) => n.clientURL),
      etcdTls: h.etcdClientTls!,
      pkiDir: h.pkiCaDir!,
      broker: h.broker.url,
      cluster: h.cluster,
      host: "127.0.0.1",
      port: 0,
      holdSeconds: 0,
      clockToleranceSeconds: 0,
      now: () => Date.now() + skewMs,
    });
  });
  afterAll(() => api?.close());

  it("gets nothing signed once its token has expired by the join API's clock", async () => {
    const [port] = await freePorts(1);
    const peerURL = `https://127.0.0.1:${port}`;
    const node = `late-${randomUUID().slice(0, 6)}`;
    // The learner lone-1 left is removed first (its admission was revoked); then this one is admitted.
    const admission = await admitWhenFree(node, peerURL);
    try {
      const exp = Number(decodeJwt(admission.token).exp) * 1000;
      skewMs = exp - Date.now() + 1_000;
      const before = await memberCount();
      const csrs = (await requestCertificates({ peer: { node, hosts: ["127.0.0.1"] }, server: { node, hosts: ["127.0.0.1"] } })).requests;
      const r = await add(api.url, admission.token, { node, peerAddress: peerURL, csrs });
      expect(r.status, r.text).toBe(410);
      expect(r.body.code).toBe("token_expired");
      expect(r.text).not.toContain("CERTIFICATE");
      expect(await memberCount()).toBe(before);
      // The same call a minute before expiry signs: the clock decided.
      skewMs = exp - Date.now() - 60_000;
      const ok = await add(api.url, admission.token, { node, peerAddress: peerURL, csrs });
      expect(ok.status, ok.text).toBe(200);
      expect(ok.body.certificates.peer).toContain("BEGIN CERTIFICATE");
    } finally {
      // Its slot goes to the next node at once.
      await adminCall(h.broker, "POST", `/v1/admin/clusters/${h.cluster}/admissions/${admission.jti}/revoke`, { reason: "test done" });
    }
  });

  /** Waits (bounded) for the broker to admit: a slot frees once lone-1's revoked admission is gone. */
  async function admitWhenFree(node: string, peerURL: string): Promise<{ token: string; jti: string }> {
    const deadline = Date.now() + 60_000;
    let last = "";
    while (Date.now() < deadline) {
      try {
        return await admit(node, peerURL);
      } catch (e) {
        last = (e as Error).message;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    throw new Error(`no admission within 60 s: ${last}`);
  }
});

describe("a joiner on TLS", () => {
  it("crashes between its add and the signed answer, and resumes without a second add and with fresh keys", async () => {
    const node = h.node("ctrl-1");
    let firstCsr = "";
    let killed: Promise<unknown> | null = null;
    h.proxy!.dropAnswerOnce(
      (r) => r.path === "/v1beta1/etcd/members" && r.body?.node === "ctrl-1",
      (r) => {
        firstCsr = String((r.body?.csrs as { peer?: string } | undefined)?.peer ?? "");
        killed = h.kill("ctrl-1", "group");
      },
      (status) => status === 200,
    );
    h.startAgent("ctrl-1");
    await h.waitFor("the first add's answer to be dropped", () => killed !== null, 120_000);
    await killed;
    expect(firstCsr).toContain("CERTIFICATE REQUEST");
    // The member was added; no certificate reached the node.
    const list = await h.etcd(h.node("ctrl-0").clientURL).memberList();
    expect(list.ok && memberByPeerUrl(list.value.members, node.peerURL)).toBeTruthy();
    const added = list.ok ? memberByPeerUrl(list.value.members, node.peerURL)!.id : "";
    // (The revocation list it fetched before asking may be there: no key, no certificate of its own.)
    expect(readdirSync(node.pkiDir).filter((f) => f !== "crl.der").sort()).toEqual(["ca.crt", "ca.key"]);

    const again = h.startAgent("ctrl-1");
    await h.waitFor("ctrl-1 to join after its restart", () => h.joined("ctrl-1"), 180_000);
    const final = await expectOneHealthyCluster(h, ["ctrl-0", "ctrl-1"]);
    // The same member: the join API answered the second add with the member of the first.
    expect(final.ids.get("ctrl-1")).toBe(added);
    expect(h.joinApi.output().match(/added learner [0-9a-f]+ for node ctrl-1 /g)).toHaveLength(1);
    // Fresh keys: the certificate it runs with is for the key of its second request, not the first.
    const sent = again.events.find((e) => e.step === "pki");
    expect(sent?.msg).toContain("signed");
    const { keyMatches } = await import("../../src/node/pki/x509.ts");
    const firstKeyCert = readFileSync(pkiFiles(node.pkiDir).peerCert, "utf8");
    expect(await keyMatches(firstKeyCert, readFileSync(pkiFiles(node.pkiDir).peerKey, "utf8"))).toBe(true);
    expect(await sameKeyAsRequest(firstKeyCert, firstCsr)).toBe(false);
  });
});

/** Whether the certificate's public key is the one in this certificate request. */
async function sameKeyAsRequest(certPem: string, csrPem: string): Promise<boolean> {
  const x509 = await import("@peculiar/x509");
  const a = Buffer.from(new x509.X509Certificate(certPem).publicKey.rawData).toString("hex");
  const b = Buffer.from(new x509.Pkcs10CertificateRequest(csrPem).publicKey.rawData).toString("hex");
  return a === b;
}
