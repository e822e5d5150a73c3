import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { allowedIdentity, requestedIdentity } from "./identity.ts";
import { certificateAuthority, haveUsableCertificates, issueOwnCertificates, pkiFiles, requestCertificates } from "./pki-dir.ts";
import {
  CertificateRequestError,
  certificateFacts,
  checkCertificateRequest,
  createCertificateAuthority,
  createCertificateRequest,
  generateKeyPair,
  issueCertificate,
  keyMatches,
  signedBy,
} from "./x509.ts";
import { PkiError } from "./ca.ts";
import { goVerify } from "../../../test/support/certcheck.ts";

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "join-broker-pki-"));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const NODE = "ctrl-1";
const PEER = "https://10.0.0.4:2380";
const identity = requestedIdentity(NODE, PEER, "https://10.0.0.4:2379");

describe("certificate requests", () => {
  it("yields the key and the hosts of a request within what is allowed", async () => {
    const pair = await generateKeyPair();
    const checked = await checkCertificateRequest(
      await createCertificateRequest(pair, { node: NODE, hosts: ["10.0.0.4", "127.0.0.1"] }),
      "server",
      allowedIdentity(NODE, PEER).server,
    );
    expect(checked.hosts).toEqual(["10.0.0.4", "127.0.0.1"]);
  });

  it("refuses another host, another common name, and a request whose signature does not hold", async () => {
    const pair = await generateKeyPair();
    const allowed = allowedIdentity(NODE, PEER);
    const refusal = (p: Promise<unknown>) =>
      p.then(
        () => null,
        (e: unknown) => (e instanceof CertificateRequestError ? e.code : String(e)),
      );
    expect(await refusal(checkCertificateRequest(await createCertificateRequest(pair, { node: NODE, hosts: ["10.0.0.5"] }), "peer", allowed.peer))).toBe(
      "csr_name_not_allowed",
    );
    // Loopback is allowed on the client port, never on the peer port.
    expect(await refusal(checkCertificateRequest(await createCertificateRequest(pair, { node: NODE, hosts: ["127.0.0.1"] }), "peer", allowed.peer))).toBe(
      "csr_name_not_allowed",
    );
    expect(await refusal(checkCertificateRequest(await createCertificateRequest(pair, { node: "ctrl-2", hosts: ["10.0.0.4"] }), "peer", allowed.peer))).toBe(
      "csr_name_not_allowed",
    );
    // One bit of the signature changed (its last byte): a well-formed request whose proof of possession fails.
    const pem = await createCertificateRequest(pair, { node: NODE, hosts: ["10.0.0.4"] });
    const der = Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ""), "base64");
    der[der.length - 1] = der[der.length - 1]! ^ 0x01;
    const tampered = `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString("base64")}\n-----END CERTIFICATE REQUEST-----\n`;
    expect(await refusal(checkCertificateRequest(tampered, "peer", allowed.peer))).toBe("invalid_csr");
    expect(await refusal(checkCertificateRequest("junk", "peer", allowed.peer))).toBe("invalid_csr");
  });
});

describe("issued certificates", () => {
  it("name what the issuer decides, chain to the CA, serve both ends of TLS, and end no later than the CA", async () => {
    const now = Date.UTC(2026, 0, 1);
    const { ca } = await createCertificateAuthority("test CA", 30, now);
    const pair = await generateKeyPair();
    const pem = await issueCertificate(ca, pair.keys.publicKey, { node: NODE, hosts: ["10.0.0.4"] }, 365, now);
    expect(certificateFacts(pem)).toMatchObject({ commonName: NODE, hosts: ["10.0.0.4"], notAfter: now + 30 * 86_400_000 });
    expect(await signedBy(pem, ca.certPem)).toBe(true);
    // Judged as etcd judges it (Go's crypto/x509), at the time it was made for.
    expect(goVerify(ca.certPem, [pem], { at: now }).output).toMatch(/^ok .* CN=ctrl-1, issued by CN=test CA/);
    expect(await keyMatches(pem, pair.keyPem)).toBe(true);
    expect(await keyMatches(pem, (await generateKeyPair()).keyPem)).toBe(false);
    const other = await createCertificateAuthority("other CA", 30, now);
    expect(await signedBy(pem, other.ca.certPem)).toBe(false);
    const x509 = await import("@peculiar/x509");
    const eku = new x509.X509Certificate(pem).getExtension(x509.ExtendedKeyUsageExtension);
    expect(eku?.usages).toEqual([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]);
  });
});

describe("a node's --pki-dir", () => {
  it("gets a CA when it has none, keeps the one there, and refuses half a pair", async () => {
    const dir = tempDir();
    const made = await certificateAuthority(dir, { create: { commonName: "c etcd CA" } });
    expect(made.created).toBe(true);
    const again = await certificateAuthority(dir, { create: { commonName: "c etcd CA" } });
    expect(again.created).toBe(false);
    expect(again.ca.certPem).toBe(made.ca.certPem);

    const half = tempDir();
    writeFileSync(pkiFiles(half).ca, made.ca.certPem);
    const err = await certificateAuthority(half, { create: { commonName: "x" } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PkiError);
    expect((err as PkiError).code).toBe("ca_incomplete");
    expect((err as PkiError).message).toContain("ca.key");
  });

  it("counts its certificates usable only for this identity, this CA, with their own keys", async () => {
    const dir = tempDir();
    const { ca } = await certificateAuthority(dir, { create: { commonName: "c" } });
    expect(await haveUsableCertificates(dir, identity)).toBe(false);
    await issueOwnCertificates(dir, ca, identity);
    expect(await haveUsableCertificates(dir, identity)).toBe(true);
    // Another peer host, another node, a key swapped, or a year later: asked for again.
    expect(await haveUsableCertificates(dir, requestedIdentity(NODE, "https://10.0.0.9:2380", "https://10.0.0.9:2379"))).toBe(false);
    expect(await haveUsableCertificates(dir, requestedIdentity("ctrl-9", PEER, "https://10.0.0.4:2379"))).toBe(false);
    expect(await haveUsableCertificates(dir, identity, Date.now() + 360 * 86_400_000)).toBe(false);
    const files = pkiFiles(dir);
    writeFileSync(files.peerKey, readFileSync(files.serverKey));
    expect(await haveUsableCertificates(dir, identity)).toBe(false);
  });

  it("will not save certificates from another CA beside the CA key it holds", async () => {
    const dir = tempDir();
    await certificateAuthority(dir, { create: { commonName: "mine" } });
    const other = await createCertificateAuthority("theirs", 30);
    const pending = await requestCertificates(identity);
    const peer = await issueCertificate(other.ca, pending.keys.peer.keys.publicKey, identity.peer, 30);
    const server = await issueCertificate(other.ca, pending.keys.server.keys.publicKey, identity.server, 30);
    await expect(pending.save(dir, { ca: other.ca.certPem, peer, server })).rejects.toThrow(PkiError);
  });
});

describe("names", () => {
  it("asks for the peer host on the peer port, the client and peer hosts on the client port", () => {
    expect(requestedIdentity("n", "https://[fd00::4]:2380", "https://127.0.0.1:2379")).toEqual({
      peer: { node: "n", hosts: ["fd00::4"] },
      server: { node: "n", hosts: ["127.0.0.1", "fd00::4", "::1", "localhost"] },
    });
    // What a node asks for is always within what its admission allows.
    const asked = requestedIdentity("n", "https://10.0.0.4:2380", "https://10.0.0.4:2379");
    expect(asked.server.hosts).toEqual(["10.0.0.4", "127.0.0.1", "::1", "localhost"]);
    expect(asked.server.hosts.every((h) => allowedIdentity("n", "https://10.0.0.4:2380").server.hosts.includes(h))).toBe(true);
    expect(allowedIdentity("n", "https://10.0.0.4:2380").server.hosts).toEqual(["10.0.0.4", "127.0.0.1", "::1", "localhost"]);
  });
});
