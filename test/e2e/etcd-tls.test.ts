/**
 * etcd as production runs it: TLS with client-certificate auth on both ports, and the join API
 * as the only issuer of joiners' certificates, for exactly the identity in the admission.
 *
 * A real broker (join-broker serve), real etcd started by the agent with --pki-dir, the join API
 * as a process (the harness's) and, for expiry, in this process with its clock moved.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tlsFetch } from "../../src/node/etcd/tls-fetch.ts";
import { memberByPeerUrl } from "../../src/node/etcd/gateway.ts";
import { startJoinApi, type JoinApiServer } from "../../src/node/join-api/server.ts";
import { etcdRootPassword } from "../../src/node/pki/etcd-identities.ts";
import { certificateAuthority, issueOwnCertificates, ownClientFiles, pkiFiles, requestCertificates } from "../../src/node/pki/pki-dir.ts";
import { certificateFacts, signedBy } from "../../src/node/pki/x509.ts";
import { goVerify } from "../support/certcheck.ts";
import { makeOperatorCa } from "../support/operator-cas.ts";
import { ClusterHarness } from "../support/cluster.ts";
import { brokerClient } from "../support/stack.ts";
import { freePorts } from "../support/etcd.ts";
import { expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { e2eSeed } from "../support/seeded.ts";

const seed = e2eSeed("etcd-tls");
let h: ClusterHarness;

beforeAll(async () => {
  h = await ClusterHarness.start({ scenario: "etcd-tls", seed, nodes: ["ctrl-0", "ctrl-1", "ctrl-2"], broker: { runtime: "serve" }, faultProxy: true });
  h.startAgent("ctrl-0");
  await h.waitFor("ctrl-0 to bootstrap", () => h.joined("ctrl-0"), 120_000);
}, 180_000);

afterAll(async () => {
  h?.writeTimeline();
  await h?.cleanup();
});

/** An admission for a node that is not run by an agent: the test makes its calls. */
async function admit(node: string, peerURL: string): Promise<{ token: string; jti: string }> {
  const { status, body } = await brokerClient(h.broker, { bearer: h.token }).cluster(h.cluster).requestTicket(node, peerURL);
  if (body.state !== "admitted" || body.role !== "join" || !body.admission)
    throw new Error(`expected an admitted join ticket, got ${status} ${JSON.stringify(body)}`);
  return { token: body.admission, jti: String(decodeJwt(body.admission).jti) };
}

async function add(joinApiUrl: string, token: string, body: unknown): Promise<{ status: number; body: Record<string, any>; text: string }> {
  const res = await fetch(`${joinApiUrl}/v1beta1/etcd/members`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : {}, text };
}

/** Waits (bounded) for the broker to admit: a slot frees once an earlier admission is gone (revoked, say). */
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

/** Waits (up to 30 s) until etcd lists no learner. */
async function untilNoLearner(): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const list = await h.etcd(h.node("ctrl-0").clientURL).memberList();
    if (list.ok && !list.value.members.some((m) => m.isLearner)) return;
    if (Date.now() > deadline) throw new Error(`a learner is still listed after 30 s: ${list.ok ? JSON.stringify(list.value.members) : list.error.message}`);
    await new Promise((r) => setTimeout(r, 200));
  }
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
    const ask = (files: Parameters<typeof tlsFetch>[0]) =>
      tlsFetch(files)(url).then(
        (r) => r.status,
        (e: Error) => e.message,
      );
    expect(await ask(h.etcdClientTls!)).toBe(200);
    // The right CA trusted, no certificate presented.
    expect(await ask({ ca: h.etcdClientTls!.ca })).not.toBe(200);
    // A certificate from another CA, with the same name and host.
    const other = mkdtempSync(join(tmpdir(), "join-broker-other-ca-"));
    const { ca } = await certificateAuthority(other, { create: { commonName: "another etcd CA" } });
    await issueOwnCertificates(other, ca, { peer: { node: "e2e-harness", hosts: ["127.0.0.1"] }, server: { node: "e2e-harness", hosts: ["127.0.0.1"] } });
    expect(await ask({ ...ownClientFiles(other), ca: h.etcdClientTls!.ca })).not.toBe(200);
    // And plain http on an https port is no way in either.
    expect(
      await fetch(url.replace("https:", "http:")).then(
        (r) => r.status,
        () => "refused",
      ),
    ).not.toBe(200);
  });

  it("refuses a peer without a certificate on the peer port", async () => {
    const peer = `${h.node("ctrl-0").peerURL}/version`;
    expect(
      await tlsFetch({ ca: h.etcdClientTls!.ca })(peer).then(
        (r) => r.status,
        (e: Error) => e.message,
      ),
    ).not.toBe(200);
    expect(await tlsFetch(h.etcdClientTls!)(peer).then((r) => r.status)).toBe(200);
  });

  it("the bootstrap node signed its own certificates with the CA the operator put in its --pki-dir", () => {
    const dir = h.node("ctrl-0").pkiDir;
    const facts = certificateFacts(readFileSync(pkiFiles(dir).peerCert, "utf8"));
    expect(facts.commonName).toBe("ctrl-0");
    expect(facts.hosts).toEqual(["127.0.0.1"]);
    expect(readdirSync(dir).sort()).toEqual(["ca.crt", "ca.key", "crl.der", "peer.crt", "peer.key", "server.crt", "server.key"]);
    // Judged as etcd's peers and clients judge them: Go's crypto/x509, the CA the only root.
    const files = pkiFiles(dir);
    expect(goVerify(files.ca, [files.peerCert, files.serverCert], { hosts: ["127.0.0.1"] }).output).toMatch(/^ok .*peer\.crt: CN=ctrl-0/);
  });
});

describe("a join API whose certificates etcd refuses says so, naming the file", () => {
  it("--etcd-cert from another CA, --etcd-cacert of another CA: logged at start and in the 503 a joining node gets, not a generic timeout", async () => {
    const other = mkdtempSync(join(tmpdir(), "join-broker-other-ca-"));
    try {
      makeOperatorCa("openssl-p256-sec1", other);
      const { ca } = await certificateAuthority(other);
      await issueOwnCertificates(other, ca, { peer: { node: "join-api", hosts: ["127.0.0.1"] }, server: { node: "join-api", hosts: ["127.0.0.1"] } });
      const cases = [
        {
          tls: { ...h.etcdClientTls!, cert: pkiFiles(other).serverCert, key: pkiFiles(other).serverKey },
          words: `refused the client certificate ${pkiFiles(other).serverCert} (TLS alert: `,
        },
        { tls: { ...h.etcdClientTls!, ca: pkiFiles(other).ca }, words: `does not verify against ${pkiFiles(other).ca}: ` },
      ];
      for (const { tls, words } of cases) {
        const logged: string[] = [];
        const api = await startJoinApi({
          etcd: h.node("ctrl-0").clientURL,
          etcdTls: tls,
          broker: h.broker.url,
          cluster: h.cluster,
          host: "127.0.0.1",
          port: 0,
          holdSeconds: 0,
          log: (l) => logged.push(l),
        });
        try {
          await expect.poll(() => logged.find((l) => l.startsWith("TLS handshake with etcd failed: ")) ?? "", { timeout: 10_000 }).toContain(words);
          expect(logged.find((l) => l.startsWith("etcd does not answer yet: "))).toContain(words);
          const [port] = await freePorts(1);
          const admission = await admitWhenFree(`tls-${port}`, `https://127.0.0.1:${port}`);
          try {
            const r = await add(api.url, admission.token, { node: `tls-${port}`, peerAddress: `https://127.0.0.1:${port}` });
            expect(r.status, r.text).toBe(503);
            expect(r.body.detail).toContain(words);
          } finally {
            await h.client.admin(h.cluster).revokeAdmission(admission.jti, "test done");
          }
          // One line per distinct failure, however many requests met it.
          expect(logged.filter((l) => l.startsWith("TLS handshake with etcd failed: "))).toHaveLength(1);
        } finally {
          await api.close();
        }
      }
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
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

    const serverElsewhere = await requestCertificates({
      peer: { node: "lone-1", hosts: ["127.0.0.1"] },
      server: { node: "lone-1", hosts: ["127.0.0.1", "evil.example"] },
    });
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
    // As etcd will judge them (Go's crypto/x509): for TLS servers and clients, each for its hosts.
    expect(goVerify(ca, [peer], { hosts: ["127.0.0.1"] }).output).toMatch(/^ok .*CN=lone-1/);
    expect(goVerify(ca, [server], { hosts: ["127.0.0.1", "localhost"] }).output).toMatch(/^ok .*CN=lone-1/);
    expect(certificateFacts(peer)).toMatchObject({ commonName: "lone-1", hosts: ["127.0.0.1"] });
    // DNS names before addresses, as Go writes them.
    expect(certificateFacts(server)).toMatchObject({ commonName: "lone-1", hosts: ["localhost", "127.0.0.1"] });
    // A year by default.
    const days = (certificateFacts(peer).notAfter - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(364);
    expect(days).toBeLessThan(366);
  });

  it("signs nothing for a revoked admission", async () => {
    await h.client.admin(h.cluster).revokeAdmission(admission.jti, "test");
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
    // The learner lone-1 left is removed first (its admission was revoked: the join API's sweep
    // removes it within 5 s, while the broker admits the next node at once); then this one is admitted.
    const admission = await admitWhenFree(node, peerURL);
    try {
      await untilNoLearner();
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
      await h.client.admin(h.cluster).revokeAdmission(admission.jti, "test done");
    }
  });
});

describe("a joiner whose certificates the cluster refuses", () => {
  it("a join API that signs with another CA than the cluster's: the joiner says what etcd refused within 10 s and exits 3, not waiting for its lease", async () => {
    // The joiner's --pki-dir as a joiner's is: no CA of its own, the join API's CA certificate comes with its certificates.
    const node = h.node("ctrl-2");
    rmSync(node.pkiDir, { recursive: true, force: true });
    const wrongCa = mkdtempSync(join(tmpdir(), "join-broker-wrong-ca-"));
    makeOperatorCa("openssl-rsa2048-pkcs1", wrongCa);
    // It signs in to etcd as the cluster's root (the password of the cluster's CA key): only its signing CA is wrong.
    const root = { user: "root", password: etcdRootPassword(readFileSync(join(h.pkiCaDir!, "ca.key"), "utf8")) };
    const wrongApi = await startJoinApi({
      etcd: h.nodes.map((n) => n.clientURL),
      etcdTls: h.etcdClientTls!,
      etcdCredentials: root,
      pkiDir: wrongCa,
      broker: h.broker.url,
      cluster: h.cluster,
      host: "127.0.0.1",
      port: 0,
    });
    try {
      const args = h.agentArgs(node, { joinApi: wrongApi.url });
      const run = h.startAgent("ctrl-2", { args });
      await h.waitFor("ctrl-2 to start etcd", () => run.events.some((e) => e.step === "etcd-start"), 120_000);
      const started = Date.now();
      await h.waitFor("ctrl-2 to report what etcd refused", () => run.events.some((e) => e.step === "etcd-tls"), 10_000);
      await h.waitFor("ctrl-2 to give up", () => run.exit !== null, 40_000);
      expect(run.exit?.code, h.describeAgents()).toBe(3);
      expect(Date.now() - started).toBeLessThan(40_000);
      // The peer, etcd's words and the file it checked against.
      const tls = run.events.filter((e) => e.step === "etcd-tls").map((e) => e.msg);
      const ctrl0 = h.node("ctrl-0").peerURL;
      expect(tls).toContainEqual(
        expect.stringMatching(
          new RegExp(
            `^etcd could not verify the certificate of its peer ${ctrl0}/members against ${node.pkiDir}/ca\\.crt: etcd's words: ".*x509: certificate signed by unknown authority"$`,
          ),
        ),
      );
      // When ctrl-0 dialled this etcd meanwhile, the other end too: it refused this node's peer
      // certificate (etcd 3.4 does not say which port a connection came to).
      for (const line of tls.filter((l) => l.includes("refused etcd's certificate"))) {
        expect(line).toMatch(
          new RegExp(
            `^127\\.0\\.0\\.1:\\d+ refused etcd's certificate (${node.pkiDir}/server\\.crt or )?${node.pkiDir}/peer\\.crt on its (peer port|client or peer port \\(etcd 3\\.4 does not say which\\)): etcd's words: "remote error: tls: bad certificate"$`,
          ),
        );
      }
      const refused = run.events.find((e) => e.step === "refused")!;
      expect(refused.msg).toMatch(/^certificates are refused, so this start cannot succeed: /);
      expect(refused.msg).toContain(`etcd could not verify the certificate of its peer ${ctrl0}/members`);
      expect(refused.msg).toContain(`etcd checks both ports against ${node.pkiDir}/ca.crt`);
      expect(refused.msg).toMatch(/left the queue \(ticket \S+ abandoned\)/);
    } finally {
      await wrongApi.close();
      rmSync(wrongCa, { recursive: true, force: true });
      // Its learner goes, so that the next joiner has the slot.
      const list = await h.etcd(h.node("ctrl-0").clientURL).memberList();
      const learner = list.ok ? memberByPeerUrl(list.value.members, node.peerURL) : undefined;
      if (learner) expect((await h.etcd(h.node("ctrl-0").clientURL).memberRemove(learner.id)).ok).toBe(true);
    }
  });
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
    // (A revocation list may be there: no key, no certificate of its own.)
    expect(
      readdirSync(node.pkiDir)
        .filter((f) => f !== "crl.der")
        .sort(),
    ).toEqual(["ca.crt", "ca.key"]);

    const again = h.startAgent("ctrl-1");
    await h.waitFor("ctrl-1 to join after its restart", () => h.joined("ctrl-1"), 180_000);
    const final = await expectOneHealthyCluster(h, ["ctrl-0", "ctrl-1"]);
    // The same member: the join API answered the second add with the member of the first.
    expect(final.ids.get("ctrl-1")).toBe(added);
    expect(h.joinApi.output().match(/added learner [0-9a-f]+ for node ctrl-1 /g)).toHaveLength(1);
    // Fresh keys: the certificate it runs with is for the key of its second request, not the first.
    const sent = again.events.find((e) => e.step === "pki" && e.msg.startsWith("the join API signed"));
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
