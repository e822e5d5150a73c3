/**
 * The certificates of an etcd cluster run with TLS on every port: a CA, and per node a peer
 * certificate (the peer port, both ends of each connection) and a server certificate (the client
 * port, and the node's own client identity). Keys are ECDSA P-256, made where they are used.
 *
 * What a certificate names is decided here from the identity the caller vouches for, never copied
 * from a request: a certificate request only proves that its sender holds the key.
 * @module
 */
import "reflect-metadata"; // @peculiar/x509's dependency injection needs the Reflect metadata API.
import * as x509 from "@peculiar/x509";
import { isIP } from "node:net";
import { randomBytes } from "node:crypto";

// The global Web Crypto (Node's webcrypto), whose key type is the one the library takes.
const provider = crypto;
const subtle = provider.subtle;
type CryptoKey = Awaited<ReturnType<typeof subtle.importKey>>;
type CryptoKeyPair = { publicKey: CryptoKey; privateKey: CryptoKey };
x509.cryptoProvider.set(provider);

const ALGORITHM = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
/** A certificate is valid from a little before it is made, so a node whose clock is behind accepts it. */
const BACKDATE_MS = 5 * 60_000;

export type CertificateKind = "peer" | "server";

/** Why a certificate request was not signed; `code` is stable. */
export class CertificateRequestError extends Error {
  override readonly name = "CertificateRequestError";
  constructor(
    readonly code: "invalid_csr" | "csr_name_not_allowed",
    message: string,
  ) {
    super(message);
  }
}

/** Why a PKI directory cannot be used; `code` is stable. */
export class PkiError extends Error {
  override readonly name = "PkiError";
  constructor(
    readonly code: "ca_incomplete" | "ca_unreadable" | "certificate_mismatch",
    message: string,
  ) {
    super(message);
  }
}

export interface KeyPair {
  /** PKCS#8 PEM. */
  keyPem: string;
  keys: CryptoKeyPair;
}

export interface CertificateAuthority {
  certPem: string;
  cert: x509.X509Certificate;
  signingKey: CryptoKey;
}

/** The identity a certificate is made for. */
export interface CertificateIdentity {
  /** The node name: the certificate's common name. */
  node: string;
  /** Host names and IP addresses for the subject alternative name. */
  hosts: readonly string[];
}

export async function generateKeyPair(): Promise<KeyPair> {
  const keys = (await subtle.generateKey(ALGORITHM, true, ["sign", "verify"])) as unknown as CryptoKeyPair;
  const pkcs8 = (await subtle.exportKey("pkcs8", keys.privateKey)) as ArrayBuffer;
  return { keys, keyPem: x509.PemConverter.encode(pkcs8, "PRIVATE KEY") };
}

/** A new self-signed CA for one cluster's etcd. */
export async function createCertificateAuthority(commonName: string, validDays: number, now = Date.now()): Promise<{ ca: CertificateAuthority; keyPem: string }> {
  const pair = await generateKeyPair();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: [{ CN: [commonName] }],
    notBefore: new Date(now - BACKDATE_MS),
    notAfter: new Date(now + validDays * 86_400_000),
    keys: pair.keys,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(pair.keys.publicKey),
    ],
  });
  return { ca: { cert, certPem: cert.toString("pem"), signingKey: pair.keys.privateKey }, keyPem: pair.keyPem };
}

/** A CA from its PEM files' contents. */
export async function loadCertificateAuthority(certPem: string, keyPem: string): Promise<CertificateAuthority> {
  let cert: x509.X509Certificate;
  let signingKey: CryptoKey;
  try {
    cert = new x509.X509Certificate(certPem);
    const der = x509.PemConverter.decodeFirst(keyPem);
    signingKey = await subtle.importKey("pkcs8", der, { name: "ECDSA", namedCurve: "P-256" }, false, ["sign"]);
  } catch (e) {
    throw new PkiError("ca_unreadable", `the CA certificate or key is not a PEM ECDSA P-256 pair (PKCS#8 key): ${(e as Error).message}`);
  }
  const basic = cert.getExtension(x509.BasicConstraintsExtension);
  if (!basic?.ca) throw new PkiError("ca_unreadable", `the certificate ${cert.subject} is not a CA (basic constraints)`);
  // The key must be the certificate's: sign something and verify it with the certificate's key.
  const probe = new TextEncoder().encode("join-broker ca check");
  const signature = await subtle.sign({ name: "ECDSA", hash: "SHA-256" }, signingKey, probe);
  const publicKey = await cert.publicKey.export({ name: "ECDSA", namedCurve: "P-256" }, ["verify"], provider);
  if (!(await subtle.verify({ name: "ECDSA", hash: "SHA-256" }, publicKey, signature, probe))) {
    throw new PkiError("ca_unreadable", `the CA key does not belong to the CA certificate ${cert.subject}`);
  }
  return { cert, certPem: cert.toString("pem"), signingKey };
}

/** A certificate request for this key, naming the identity it asks for. */
export async function createCertificateRequest(pair: KeyPair, identity: CertificateIdentity): Promise<string> {
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: [{ CN: [identity.node] }],
    keys: pair.keys,
    signingAlgorithm: ALGORITHM,
    extensions: [new x509.SubjectAlternativeNameExtension(identity.hosts.map(generalName))],
  });
  return csr.toString("pem");
}

/** A request whose signature holds and whose names are all allowed: its key and the hosts it asked for. */
export interface CheckedRequest {
  publicKey: CryptoKey;
  hosts: string[];
}

/** Checks a request against the names allowed; throws CertificateRequestError when it fails. */
export async function checkCertificateRequest(pem: string, kind: CertificateKind, allowed: CertificateIdentity): Promise<CheckedRequest> {
  let csr: x509.Pkcs10CertificateRequest;
  try {
    csr = new x509.Pkcs10CertificateRequest(pem);
  } catch (e) {
    throw new CertificateRequestError("invalid_csr", `the ${kind} certificate request is not a PEM PKCS#10 request: ${(e as Error).message}`);
  }
  let publicKey: CryptoKey;
  try {
    publicKey = await csr.publicKey.export(provider);
    if (!(await csr.verify(provider))) throw new Error("its signature does not verify");
  } catch (e) {
    throw new CertificateRequestError("invalid_csr", `the ${kind} certificate request is unusable (ECDSA P-256 keys only): ${(e as Error).message}`);
  }
  const names = csr.subjectName.getField("CN");
  if (names.some((cn) => cn !== allowed.node)) {
    throw new CertificateRequestError("csr_name_not_allowed", `the ${kind} certificate request names ${names.join(", ")}; this admission is for node ${allowed.node}`);
  }
  const hosts = requestedHosts(csr);
  const others = hosts.filter((h) => !allowed.hosts.some((a) => sameHost(a, h)));
  if (others.length) {
    throw new CertificateRequestError("csr_name_not_allowed", `the ${kind} certificate request asks for ${others.join(", ")}; this admission allows only ${allowed.hosts.join(", ")}`);
  }
  return { publicKey, hosts };
}

/** A certificate for `identity` on `publicKey`, signed by the CA; for TLS servers and clients both. */
export async function issueCertificate(ca: CertificateAuthority, publicKey: CryptoKey, identity: CertificateIdentity, validDays: number, now = Date.now()): Promise<string> {
  const notAfter = Math.min(now + validDays * 86_400_000, ca.cert.notAfter.getTime());
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: [{ CN: [identity.node] }],
    issuer: ca.cert.subjectName.toString(),
    notBefore: new Date(now - BACKDATE_MS),
    notAfter: new Date(notAfter),
    publicKey,
    signingKey: ca.signingKey,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
      new x509.SubjectAlternativeNameExtension(identity.hosts.map(generalName)),
      await x509.AuthorityKeyIdentifierExtension.create(ca.cert),
      await x509.SubjectKeyIdentifierExtension.create(publicKey),
    ],
  });
  return cert.toString("pem");
}

/** What a certificate says about itself, for checks before it is used. */
export interface CertificateFacts {
  commonName: string;
  hosts: string[];
  notAfter: number;
  issuer: string;
}

export function certificateFacts(pem: string): CertificateFacts {
  const cert = new x509.X509Certificate(pem);
  return {
    commonName: cert.subjectName.getField("CN")[0] ?? "",
    hosts: namesOf(cert.getExtension(x509.SubjectAlternativeNameExtension)),
    notAfter: cert.notAfter.getTime(),
    issuer: cert.issuer,
  };
}

/** Whether `pem` was signed by this CA certificate. */
export async function signedBy(pem: string, caPem: string): Promise<boolean> {
  try {
    return await new x509.X509Certificate(pem).verify({ publicKey: new x509.X509Certificate(caPem), signatureOnly: true }, provider);
  } catch {
    return false;
  }
}

/** Whether the certificate and the key (PKCS#8 PEM) belong together. */
export async function keyMatches(certPem: string, keyPem: string): Promise<boolean> {
  try {
    const key = await subtle.importKey("pkcs8", x509.PemConverter.decodeFirst(keyPem), { name: "ECDSA", namedCurve: "P-256" }, true, ["sign"]);
    const jwk = (await subtle.exportKey("jwk", key)) as { x?: string; y?: string };
    const pub = await new x509.X509Certificate(certPem).publicKey.export({ name: "ECDSA", namedCurve: "P-256" }, ["verify"], provider);
    const pubJwk = (await subtle.exportKey("jwk", pub)) as { x?: string; y?: string };
    return jwk.x === pubJwk.x && jwk.y === pubJwk.y;
  } catch {
    return false;
  }
}

function requestedHosts(csr: x509.Pkcs10CertificateRequest): string[] {
  return namesOf(csr.extensions.find((e): e is x509.SubjectAlternativeNameExtension => e instanceof x509.SubjectAlternativeNameExtension) ?? null);
}

function namesOf(san: x509.SubjectAlternativeNameExtension | null): string[] {
  if (!san) return [];
  return san.names.items.map((n) => n.value);
}

function generalName(host: string): { type: "ip" | "dns"; value: string } {
  return { type: isIP(bareHost(host)) ? "ip" : "dns", value: bareHost(host) };
}

function bareHost(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

function sameHost(a: string, b: string): boolean {
  return bareHost(a).toLowerCase() === bareHost(b).toLowerCase();
}

function serial(): string {
  // Positive and unique: 16 random bytes with the top bit clear.
  const bytes = randomBytes(16);
  bytes[0]! &= 0x7f;
  return bytes.toString("hex");
}
