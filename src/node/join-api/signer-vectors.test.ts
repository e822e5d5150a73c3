/**
 * The shared signer vectors (integrations/vectors/signer-vectors.json, requests made by openssl
 * with scripts/signer-vectors.mjs): the TypeScript signer answers each case as the file says,
 * and what it issues for the accepted ones has the profile of its kind. The Go signer is held to
 * the same file (integrations/go/joinhandler/vectors_test.go).
 */
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createCertificateAuthority } from "../pki/x509.ts";
import { CertificateSigner } from "./signer.ts";

interface Requests {
  peer: string;
  server: string;
}
interface Case {
  name: string;
  kind: "peer" | "server" | "client";
  node?: string;
  peerURL?: string;
  csr: string;
  good?: Requests;
  expect: { ok: true; hosts: string[] } | { ok: false; status: number; code: string };
}
const file = JSON.parse(readFileSync(resolve(import.meta.dirname, "../../../integrations/vectors/signer-vectors.json"), "utf8")) as {
  admission: { node: string; peerURL: string };
  good: Requests;
  cases: Case[];
};

let signer: CertificateSigner;
beforeAll(async () => {
  signer = CertificateSigner.fromAuthority((await createCertificateAuthority("signer vectors CA", 30)).ca);
});

describe("the shared signer vectors", () => {
  it("cover every outcome and both kinds", () => {
    const outcomes = new Set(file.cases.map((c) => (c.expect.ok ? "ok" : c.expect.code)));
    expect([...outcomes].sort()).toEqual(["csr_name_not_allowed", "invalid_csr", "ok"]);
    expect(new Set(file.cases.map((c) => c.kind))).toEqual(new Set(["peer", "server", "client"]));
    expect(file.cases.length).toBeGreaterThan(40);
  });

  it.each(file.cases)("$name ($kind)", async (c) => {
    const node = c.node ?? file.admission.node;
    const peerURL = c.peerURL ?? file.admission.peerURL;
    const good = c.good ?? file.good;
    const checked = await signer.check({ ...good, [c.kind]: c.csr }, node, peerURL);
    if (!c.expect.ok) {
      expect(checked.ok ? "signed" : { status: checked.status, code: checked.code }).toEqual({ status: c.expect.status, code: c.expect.code });
      return;
    }
    if (!checked.ok) throw new Error(`expected it signed, got ${checked.status} ${checked.code}: ${checked.detail}`);
    const issued = await signer.issue(checked.value);
    const cert = new x509.X509Certificate(issued[c.kind]!);
    const san = cert.getExtension(x509.SubjectAlternativeNameExtension);
    expect(san?.names.items.map((n) => n.value) ?? []).toEqual(c.expect.hosts);
    expect(cert.subjectName.getField("CN")).toEqual(c.kind === "client" ? ["kube-apiserver"] : [node]);
    if (c.kind === "client") expect(cert.subjectName.getField("OU")).toEqual([node]);
    expect(cert.serialNumber).toBe(checked.value.serials[c.kind]);
    expect(cert.getExtension(x509.BasicConstraintsExtension)).toMatchObject({ ca: false, critical: true });
    expect(cert.getExtension(x509.ExtendedKeyUsageExtension)?.usages).toEqual(
      c.kind === "client" ? ["1.3.6.1.5.5.7.3.2"] : ["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"],
    );
    const rsa = (cert.publicKey.algorithm as { name: string }).name.startsWith("RSA");
    expect(cert.getExtension(x509.KeyUsagesExtension)?.usages).toBe(x509.KeyUsageFlags.digitalSignature | (rsa ? x509.KeyUsageFlags.keyEncipherment : 0));
    expect(cert.getExtension(x509.SubjectKeyIdentifierExtension)).toBeTruthy();
    expect(cert.getExtension(x509.AuthorityKeyIdentifierExtension)).toBeTruthy();
  });
});
