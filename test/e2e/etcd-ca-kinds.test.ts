/**
 * The operator's etcd CA as the tools made it, on real etcd with TLS and client-certificate auth
 * on both ports: for each kind, one cluster where the bootstrap node signs its own certificates
 * with that CA (the agent's --pki-dir) and a joiner gets its certificates from the join API
 * (`controller --pki-dir`, the same CA directory as it is). Every certificate signed here — both
 * nodes', the join API's and the harness's etcd client certificates — is judged by Go's
 * crypto/x509 (certcheck), as etcd and Kubernetes judge it, and etcd's own acceptance is the
 * cluster forming. kubeadm's own CA directory: kubeadm-ca.test.ts.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { pkiFiles } from "../../src/node/pki/pki-dir.ts";
import { goVerify } from "../support/certcheck.ts";
import { ClusterHarness } from "../support/cluster.ts";
import { expectOneHealthyCluster } from "../support/cluster-assertions.ts";
import { OPERATOR_CA_KINDS, makeOperatorCa, opensslP256Ca } from "../support/operator-cas.ts";
import { e2eSeed } from "../support/seeded.ts";

/**
 * One of each key algorithm and subject encoding etcd sees (the key's file format matters only
 * to the loader: src/node/pki/ca.test.ts reads every one). The first is the one-liner most guides
 * give, with which a bootstrap node used to wait forever: etcd refused every certificate it signed.
 */
const KINDS = ["openssl-p256-pkcs8", "openssl-rsa2048-pkcs1", "openssl-rsa4096-pkcs8", "openssl-p384-sec1", "openssl-ed25519", "go-rsa2048-pkcs1"];

const seed = e2eSeed("etcd-ca-kinds");
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("a cluster on the operator's etcd CA", () => {
  for (const name of KINDS) {
    const kind = OPERATOR_CA_KINDS.find((k) => k.name === name)!;
    it(`${kind.name} (${kind.description}): the bootstrap node and a joiner run on it, and Go accepts every certificate signed with it`, async () => {
      const caDir = mkdtempSync(join(tmpdir(), `join-broker-ca-${kind.name}-`));
      dirs.push(caDir);
      makeOperatorCa(kind, caDir);
      const before = { cert: readFileSync(join(caDir, "ca.crt")), key: readFileSync(join(caDir, "ca.key")) };
      const h = await ClusterHarness.start({
        scenario: `ca-${kind.name}`,
        seed,
        nodes: ["ctrl-0", "ctrl-1"],
        broker: { runtime: "serve" },
        operatorCa: { dir: caDir },
      });
      try {
        h.startAgent("ctrl-0");
        await h.waitFor("ctrl-0 to bootstrap", () => h.joined("ctrl-0"), 90_000);
        h.startAgent("ctrl-1");
        await h.waitFor("ctrl-1 to join", () => h.joined("ctrl-1"), 120_000);
        await expectOneHealthyCluster(h, ["ctrl-0", "ctrl-1"]);

        const caFile = join(caDir, "ca.crt");
        for (const node of ["ctrl-0", "ctrl-1"]) {
          const files = pkiFiles(h.node(node).pkiDir);
          const verdict = goVerify(caFile, [files.peerCert, files.serverCert], { hosts: ["127.0.0.1"] });
          expect(verdict.output, `${node}'s certificates`).toMatch(/^ok .*peer\.crt: CN=ctrl-\d/);
          expect(verdict.ok).toBe(true);
          // The CA certificate each node trusts is the operator's, as it is.
          expect(readFileSync(files.ca).equals(before.cert), `${node}'s ca.crt`).toBe(true);
        }
        // The harness's client certificate (the join API makes its own in memory, the same way).
        const clients = goVerify(caFile, [h.etcdClientTls!.cert!], { usage: "client" });
        expect(clients.output).toMatch(/^ok /);
        expect(clients.ok).toBe(true);
        // The bootstrap node named the CA it signs with before it asked the broker for anything.
        const bootstrap = h.current("ctrl-0")!;
        const first = bootstrap.events.findIndex((e) => e.step === "pki");
        expect(bootstrap.events[first]?.msg).toMatch(/^the etcd CA in \S+ \(.*CN=etcd-ca; (RSA \d+|ECDSA P-\d+|Ed25519), signs with \S+; valid until /);
        expect(first).toBeLessThan(bootstrap.events.findIndex((e) => e.step === "admitted"));
        expect(h.joinApi.output()).toMatch(/signing joiners' etcd certificates with the CA in \S+: .*CN=etcd-ca/);
        // Nothing changed the operator's files.
        expect(readFileSync(join(caDir, "ca.crt")).equals(before.cert) && readFileSync(join(caDir, "ca.key")).equals(before.key)).toBe(true);
      } finally {
        h.writeTimeline({ kind: kind.name });
        await h.cleanup();
      }
    });
  }
});

describe("a bootstrap node whose own certificates etcd refuses", () => {
  it("an operator CA constrained to other addresses (name constraints, 10.0.0.0/8): the agent reports etcd's refusal within 10 s and exits 3, not waiting for its lease", async () => {
    const caDir = mkdtempSync(join(tmpdir(), "join-broker-ca-constrained-"));
    dirs.push(caDir);
    // A CA that may sign only for 10.0.0.0/8 and *.example.internal, made by openssl; the node runs on 127.0.0.1.
    writeFileSync(
      join(caDir, "ca.cnf"),
      [
        "[req]",
        "distinguished_name = dn",
        "x509_extensions = ext",
        "[dn]",
        "[ext]",
        "basicConstraints = critical,CA:TRUE",
        "keyUsage = critical,keyCertSign,cRLSign",
        "subjectKeyIdentifier = hash",
        "nameConstraints = critical,permitted;IP:10.0.0.0/255.0.0.0,permitted;DNS:example.internal",
        "",
      ].join("\n"),
    );
    opensslP256Ca(caDir, { subject: "/O=Acme etcd/CN=etcd-ca", extra: ["-config", "ca.cnf"] });
    const h = await ClusterHarness.start({
      scenario: "ca-constrained",
      seed,
      nodes: ["ctrl-0"],
      broker: { runtime: "serve" },
      operatorCa: { dir: caDir, refused: true },
    });
    try {
      const run = h.startAgent("ctrl-0");
      await h.waitFor("ctrl-0 to start etcd", () => run.events.some((e) => e.step === "etcd-start"), 60_000);
      const started = Date.now();
      await h.waitFor("ctrl-0 to report what etcd refused", () => run.events.some((e) => e.step === "etcd-tls"), 10_000);
      await h.waitFor("ctrl-0 to give up", () => run.exit !== null, 30_000);
      expect(run.exit?.code, h.describeAgents()).toBe(3);
      expect(Date.now() - started).toBeLessThan(30_000);
      const pki = h.node("ctrl-0").pkiDir;
      const tls = run.events.filter((e) => e.step === "etcd-tls").map((e) => e.msg);
      // Go's words (etcd's log) and OpenSSL's (this node's own request): neither lets 127.0.0.1 pass the constraints.
      expect(tls).toContainEqual(
        expect.stringMatching(
          new RegExp(
            `^etcd rejected the certificate of 127\\.0\\.0\\.1:\\d+ on its client port, which must be signed by the CA in ${pki}/ca\\.crt \\(this node's own is ${pki}/server\\.crt\\): etcd's words: ".*x509: .*127\\.0\\.0\\.1.*"$`,
          ),
        ),
      );
      expect(tls).toContainEqual(
        expect.stringMatching(new RegExp(`^this node's own request to its etcd at ${h.node("ctrl-0").clientURL} failed the TLS handshake: `)),
      );
      expect(run.events.find((e) => e.step === "refused")?.msg).toMatch(
        /^certificates are refused, so this start cannot succeed: .*left the queue \(ticket \S+ abandoned\)$/,
      );
      // Go refuses the same certificates it would refuse anywhere.
      const files = pkiFiles(pki);
      expect(goVerify(files.ca, [files.serverCert]).output).toMatch(/not permitted|not authorized/);
    } finally {
      h.writeTimeline({ kind: "constrained" });
      await h.cleanup();
    }
  });
});
