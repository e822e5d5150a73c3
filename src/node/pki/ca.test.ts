/**
 * The operator's etcd CA as the tools that make CAs wrote it (openssl, Go's crypto/x509; kubeadm's
 * own in test/e2e/kubeadm-ca.test.ts): every kind loads, everything it signs is judged by Go's
 * crypto/x509 (test/support/certcheck.ts), and a CA that cannot sign what etcd accepts is refused
 * with the file and the reason.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { X509Certificate as NodeCertificate } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import "reflect-metadata"; // before @peculiar/x509, as its dependency injection needs it
import * as x509 from "@peculiar/x509";
import { afterEach, describe, expect, it } from "vitest";
import { goVerify } from "../../../test/support/certcheck.ts";
import { OPERATOR_CA_KINDS, makeOperatorCa, opensslP256Ca } from "../../../test/support/operator-cas.ts";
import { PkiError, loadCertificateAuthority } from "./ca.ts";
import { certificateParts } from "./der.ts";
import { requestedIdentity } from "./identity.ts";
import { certificateAuthority, haveUsableCertificates, issueOwnCertificates, pkiFiles, readCertificateAuthority } from "./pki-dir.ts";
import { createCertificateAuthority, generateKeyPair, issueCertificate, signedBy } from "./x509.ts";

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "join-broker-ca-"));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const identity = requestedIdentity("ctrl-1", "https://10.0.0.4:2380", "https://10.0.0.4:2379");
const SIGNATURE_OIDS: Record<string, string> = {
  "RSA 2048": "1.2.840.113549.1.1.11",
  "RSA 4096": "1.2.840.113549.1.1.11",
  "ECDSA P-256": "1.2.840.10045.4.3.2",
  "ECDSA P-384": "1.2.840.10045.4.3.3",
  Ed25519: "1.3.101.112",
};

const openssl = (dir: string, ...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });

describe("every kind of CA an operator has", () => {
  for (const kind of OPERATOR_CA_KINDS) {
    // RSA 4096 key generation alone can take seconds on a loaded machine.
    it(`${kind.name}: ${kind.description}`, { timeout: 60_000 }, async () => {
      const dir = tempDir();
      const { cert } = makeOperatorCa(kind, dir);
      expect(readFileSync(pkiFiles(dir).caKey, "utf8")).toMatch(new RegExp(`^-----BEGIN ${kind.keyLabel}-----`));
      const caPem = readFileSync(cert, "utf8");
      const ca = await readCertificateAuthority(dir);
      // The bootstrap node's own certificates, as the agent signs them in its --pki-dir.
      await issueOwnCertificates(dir, ca, identity);
      const files = pkiFiles(dir);
      const verdict = goVerify(files.ca, [files.peerCert, files.serverCert], { hosts: ["10.0.0.4"] });
      expect(verdict.output).toMatch(/^ok /);
      expect(verdict.ok).toBe(true);
      expect(await haveUsableCertificates(dir, identity)).toBe(true);
      for (const file of [files.peerCert, files.serverCert]) {
        const issued = new NodeCertificate(readFileSync(file));
        // The issuer is the CA's subject as stored, byte for byte.
        expect(Buffer.from(certificateParts(issued.raw).issuer).equals(certificateParts(new NodeCertificate(caPem).raw).subject)).toBe(true);
        const parsed = new x509.X509Certificate(readFileSync(file, "utf8"));
        const ski = new x509.X509Certificate(caPem).getExtension(x509.SubjectKeyIdentifierExtension)?.keyId;
        expect(parsed.getExtension(x509.AuthorityKeyIdentifierExtension)?.keyId).toBe(ski);
        expect(parsed.signatureAlgorithm).toBeDefined();
        expect(new x509.X509Certificate(readFileSync(file, "utf8")).publicKey.algorithm).toMatchObject({ name: "ECDSA", namedCurve: "P-256" });
      }
      // The signature algorithm follows the CA's key.
      const tbsAlgorithm = readOid(certificateParts(new NodeCertificate(readFileSync(files.peerCert)).raw).signatureAlgorithm);
      expect(tbsAlgorithm).toBe(SIGNATURE_OIDS[ca.signing.key]);
    });
  }

  it("signs with the CA's subject bytes, not its name spelled anew (openssl's UTF8String): Go chains what openssl also accepts", async () => {
    const dir = tempDir();
    makeOperatorCa("openssl-p256-sec1", dir);
    const caPem = readFileSync(pkiFiles(dir).ca, "utf8");
    // The name written again from its text is PrintableString: not what the CA holds.
    const reencoded = Buffer.from(new x509.Name(new x509.X509Certificate(caPem).subject).toArrayBuffer());
    const stored = Buffer.from(certificateParts(new NodeCertificate(caPem).raw).subject);
    expect(reencoded.equals(stored)).toBe(false);
    const ca = await readCertificateAuthority(dir);
    const pair = await generateKeyPair();
    const pem = await issueCertificate(ca, pair.keys.publicKey, identity.server, 30);
    expect(goVerify(caPem, [pem], { hosts: ["127.0.0.1", "10.0.0.4"] }).output).toMatch(/^ok /);
    expect(await signedBy(pem, caPem)).toBe(true);
    const leafDir = tempDir();
    writeFileSync(join(leafDir, "ca.pem"), caPem);
    writeFileSync(join(leafDir, "leaf.pem"), pem);
    expect(openssl(leafDir, "verify", "-CAfile", "ca.pem", "leaf.pem").toString()).toContain("leaf.pem: OK");
  });

  it("copies a subject key identifier that is not the SHA-1 of the CA's key (RFC 7093's truncated SHA-256, say) into the authority key identifier", async () => {
    const dir = tempDir();
    const ski = "5A:1C:3D:7E:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF";
    writeFileSync(
      join(dir, "ca.cnf"),
      [
        "[req]",
        "distinguished_name = dn",
        "x509_extensions = ext",
        "[dn]",
        "[ext]",
        "basicConstraints = critical,CA:TRUE",
        "keyUsage = critical,keyCertSign",
        `subjectKeyIdentifier = ${ski}`,
        "",
      ].join("\n"),
    );
    opensslP256Ca(dir, { extra: ["-config", "ca.cnf"] });
    const ca = await readCertificateAuthority(dir);
    expect(ca.subjectKeyId).toBe(ski.replace(/:/g, "").toLowerCase());
    const pem = await issueCertificate(ca, (await generateKeyPair()).keys.publicKey, identity.peer, 30);
    expect(new x509.X509Certificate(pem).getExtension(x509.AuthorityKeyIdentifierExtension)?.keyId).toBe(ca.subjectKeyId);
    expect(goVerify(pkiFiles(dir).ca, [pem]).output).toMatch(/^ok /);
  });

  it("ends what it signs no later than the CA", async () => {
    const now = Date.UTC(2026, 0, 1);
    const { ca } = await createCertificateAuthority("short CA", 30, now);
    const pem = await issueCertificate(ca, (await generateKeyPair()).keys.publicKey, identity.peer, 365, now);
    expect(new NodeCertificate(pem).validTo).toBe(new NodeCertificate(ca.certPem).validTo);
  });
});

describe("a certificate that only spells the CA's name", () => {
  it("is not counted as signed by it: the node's certificates are made again", async () => {
    const dir = tempDir();
    makeOperatorCa("openssl-p256-sec1", dir);
    const ca = await readCertificateAuthority(dir);
    await issueOwnCertificates(dir, ca, identity);
    expect(await haveUsableCertificates(dir, identity)).toBe(true);
    // The same certificate with its issuer re-encoded (what an earlier release wrote), signed again by the CA.
    const files = pkiFiles(dir);
    const der = new NodeCertificate(readFileSync(files.peerCert)).raw;
    const { tbsFields, issuer } = certificateParts(der);
    const reencoded = new Uint8Array(new x509.Name(ca.cert.subject).toArrayBuffer());
    const tbs = Buffer.concat([Buffer.from([0x30, 0x82, 0, 0]), ...tbsFields.map((f) => (f === issuer ? reencoded : f))]);
    tbs.writeUInt16BE(tbs.length - 4, 2);
    const { sign } = await import("node:crypto");
    const signature = sign(ca.signing.hash, tbs, { key: ca.privateKey, dsaEncoding: "der" });
    const { bitString, sequence } = await import("./der.ts");
    const forged = sequence([tbs, certificateParts(der).signatureAlgorithm, bitString(signature)]);
    writeFileSync(files.peerCert, x509.PemConverter.encode(forged.buffer as ArrayBuffer, "CERTIFICATE"));
    expect(goVerify(files.ca, [files.peerCert]).output).toContain("unknown authority");
    expect(await signedBy(readFileSync(files.peerCert, "utf8"), ca.certPem)).toBe(false);
    expect(await haveUsableCertificates(dir, identity)).toBe(false);
  });
});

describe("a CA that cannot sign what etcd accepts is refused, naming the file and the reason", () => {
  /** The refusal of the CA in `dir` (a PkiError's code and message), or null when it loads. */
  async function refusal(dir: string, now?: number): Promise<{ code: string; message: string } | null> {
    try {
      await readCertificateAuthority(dir, now);
      return null;
    } catch (e) {
      if (!(e instanceof PkiError)) throw e;
      return { code: e.code, message: e.message };
    }
  }

  /** A CA made by openssl with these extensions (an openssl configuration section). */
  function opensslCa(dir: string, extensions: string[], keyArgs = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]): void {
    writeFileSync(join(dir, "ca.cnf"), ["[req]", "distinguished_name = dn", "x509_extensions = ext", "[dn]", "[ext]", ...extensions, ""].join("\n"));
    openssl(dir, "req", "-x509", ...keyArgs, "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "30", "-subj", "/CN=some CA", "-config", "ca.cnf");
  }

  it("a key that is unreadable, encrypted, or missing", async () => {
    const dir = tempDir();
    makeOperatorCa("openssl-p256-pkcs8", dir);
    const { ca: certFile, caKey } = pkiFiles(dir);
    writeFileSync(caKey, "not a key\n");
    expect(await refusal(dir)).toEqual({
      code: "ca_unreadable",
      message: expect.stringMatching(new RegExp(`^${caKey} is not a PEM private key \\(PKCS#1, SEC1 or PKCS#8\\)`)),
    });
    openssl(dir, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-aes256", "-pass", "pass:secret", "-out", "ca.key");
    expect(await refusal(dir)).toEqual({
      code: "ca_unreadable",
      message: expect.stringContaining(`${caKey} is encrypted: the CA key must be readable without a passphrase`),
    });
    rmSync(caKey);
    expect(await refusal(dir)).toEqual({ code: "ca_incomplete", message: `${caKey} missing: the etcd CA is a pair of PEM files, ca.crt and ca.key` });
    makeOperatorCa("openssl-p256-pkcs8", dir);
    writeFileSync(certFile, "-----BEGIN CERTIFICATE-----\nnonsense\n-----END CERTIFICATE-----\n");
    expect(await refusal(dir)).toEqual({ code: "ca_unreadable", message: expect.stringMatching(new RegExp(`^${certFile} is not a PEM certificate`)) });
  });

  it("a key that is not the certificate's", { timeout: 30_000 }, async () => {
    const dir = tempDir();
    makeOperatorCa("openssl-rsa2048-pkcs1", dir);
    const other = tempDir();
    makeOperatorCa("openssl-rsa2048-pkcs1", other);
    writeFileSync(pkiFiles(dir).caKey, readFileSync(pkiFiles(other).caKey));
    const { ca, caKey } = pkiFiles(dir);
    expect(await refusal(dir)).toEqual({
      code: "ca_key_mismatch",
      message: `${caKey} is not the key of ${ca} (C=DE, O=Acme etcd, OU=ops, CN=etcd-ca): the certificate's public key is another one`,
    });
  });

  it("a certificate that is no CA, or may not sign certificates, or only for TLS servers", async () => {
    const cases: [string[], string, RegExp][] = [
      [["subjectKeyIdentifier = hash"], "ca_not_a_ca", /is not a CA certificate \(no basic constraints extension\)/],
      [["basicConstraints = critical,CA:FALSE"], "ca_not_a_ca", /is not a CA certificate \(basic constraints CA:FALSE\)/],
      [
        ["basicConstraints = critical,CA:TRUE", "keyUsage = critical,digitalSignature,cRLSign"],
        "ca_cannot_sign",
        /may not sign certificates: its key usage \(digitalSignature, cRLSign\) lacks keyCertSign/,
      ],
      [
        ["basicConstraints = critical,CA:TRUE", "keyUsage = critical,keyCertSign", "extendedKeyUsage = serverAuth"],
        "ca_cannot_sign",
        /limits what it signs to the extended key usage serverAuth: etcd uses each certificate as a TLS server and a TLS client/,
      ],
    ];
    for (const [extensions, code, message] of cases) {
      const dir = tempDir();
      opensslCa(dir, extensions);
      const r = await refusal(dir);
      expect(r, extensions.join("; ")).toEqual({ code, message: expect.stringMatching(message) });
      expect(r!.message.startsWith(`${pkiFiles(dir).ca} (CN=some CA)`)).toBe(true);
    }
    // Both TLS usages, or any, are fine.
    const both = tempDir();
    opensslCa(both, ["basicConstraints = critical,CA:TRUE", "keyUsage = critical,keyCertSign", "extendedKeyUsage = serverAuth,clientAuth"]);
    expect(await refusal(both)).toBeNull();
  });

  it("a CA outside its validity, by this machine's clock", async () => {
    const dir = tempDir();
    makeOperatorCa("openssl-p384-sec1", dir);
    const cert = new NodeCertificate(readFileSync(pkiFiles(dir).ca));
    const end = Date.parse(cert.validTo);
    expect(await refusal(dir, end + 1_000)).toEqual({
      code: "ca_not_valid_now",
      message: `${pkiFiles(dir).ca} (C=DE, O=Acme etcd, OU=ops, CN=etcd-ca) expired on ${new Date(end).toISOString()}`,
    });
    expect((await refusal(dir, Date.parse(cert.validFrom) - 60_000))?.message).toMatch(/is not valid before .* \(this machine's clock says /);
    expect(await refusal(dir, end - 60_000)).toBeNull();
  });

  it("a key of another kind: RSA below 2048 bits, P-521, Ed448, RSA-PSS", { timeout: 30_000 }, async () => {
    const cases: [string[], string][] = [
      [["-newkey", "rsa:1024"], "holds an RSA 1024 key"],
      [["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-521"], "holds an ECDSA key on curve secp521r1"],
      [["-newkey", "ed448"], "holds an ED448 key"],
      [["-newkey", "rsa-pss", "-pkeyopt", "rsa_keygen_bits:2048"], "holds an RSA-PSS key"],
    ];
    for (const [keyArgs, words] of cases) {
      const dir = tempDir();
      opensslCa(dir, ["basicConstraints = critical,CA:TRUE", "keyUsage = critical,keyCertSign"], keyArgs);
      const r = await refusal(dir);
      expect(r, keyArgs.join(" ")).toEqual({ code: "ca_key_unsupported", message: expect.stringContaining(`${pkiFiles(dir).caKey} ${words}`) });
      expect(r!.message).toContain("an etcd CA key here is RSA 2048–4096 bits, ECDSA P-256 or P-384, or Ed25519");
    }
  });

  it("the CA a bootstrap node made itself still loads, and an unnamed pair is named as such", async () => {
    const dir = tempDir();
    const made = await certificateAuthority(dir, { create: { commonName: "c etcd CA" } });
    expect(made.ca.signing).toMatchObject({ key: "ECDSA P-256", algorithm: "ecdsa-with-SHA256" });
    const a = await createCertificateAuthority("a", 30);
    const b = await createCertificateAuthority("b", 30);
    const err = await loadCertificateAuthority(a.ca.certPem, b.keyPem).catch((e: unknown) => e);
    expect((err as PkiError).message).toBe("the CA key is not the key of the CA certificate (CN=a): the certificate's public key is another one");
  });
});

/** The OID of a DER AlgorithmIdentifier. */
function readOid(algorithmIdentifier: Uint8Array): string {
  const oid = algorithmIdentifier.subarray(4, 4 + algorithmIdentifier[3]!);
  const parts = [Math.floor(oid[0]! / 40), oid[0]! % 40];
  let value = 0;
  for (const byte of oid.subarray(1)) {
    value = value * 128 + (byte & 0x7f);
    if (!(byte & 0x80)) {
      parts.push(value);
      value = 0;
    }
  }
  return parts.join(".");
}
