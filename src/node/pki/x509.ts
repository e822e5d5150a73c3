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
import { X509Certificate as NodeCertificate, createPrivateKey, randomBytes, sign } from "node:crypto";
import { loadCertificateAuthority, type CertificateAuthority } from "./ca.ts";
import { bitString, certificateParts, sequence } from "./der.ts";

// The CA (loading it, its checks and its errors) lives in ca.ts; what signs with it is here.
export { loadCertificateAuthority, PkiError, type CertificateAuthority } from "./ca.ts";

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

export interface KeyPair {
  /** PKCS#8 PEM. */
  keyPem: string;
  keys: CryptoKeyPair;
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

/** A new self-signed CA for one cluster's etcd (ECDSA P-256, made here). */
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
  return { ca: await loadCertificateAuthority(cert.toString("pem"), pair.keyPem, { now }), keyPem: pair.keyPem };
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

/**
 * A certificate for `identity` on `publicKey`, signed by the CA with the algorithm its key calls
 * for; for TLS servers and clients both. Its issuer is the CA's subject byte for byte and its
 * authority key identifier the CA's subject key identifier (none when the CA has none, as Go's
 * crypto/x509 does): Go finds a certificate's parent by those bytes, not by what they spell.
 */
export async function issueCertificate(ca: CertificateAuthority, publicKey: CryptoKey, identity: CertificateIdentity, validDays: number, now = Date.now()): Promise<string> {
  const notAfter = Math.min(now + validDays * 86_400_000, ca.cert.notAfter.getTime());
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: [{ CN: [identity.node] }],
    // Re-encoded by the library (an openssl UTF8String may become a PrintableString): the stored bytes replace it below.
    issuer: ca.cert.subjectName,
    notBefore: new Date(now - BACKDATE_MS),
    notAfter: new Date(notAfter),
    publicKey,
    signingKey: ca.signingKey,
    signingAlgorithm: ca.signing.signingAlgorithm,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
      new x509.SubjectAlternativeNameExtension(identity.hosts.map(generalName)),
      ...(ca.subjectKeyId ? [new x509.AuthorityKeyIdentifierExtension(ca.subjectKeyId)] : []),
      await x509.SubjectKeyIdentifierExtension.create(publicKey),
    ],
  });
  return withIssuerOf(ca, new Uint8Array(cert.rawData));
}

/** The certificate with the CA's subject bytes as its issuer, signed again over that. */
function withIssuerOf(ca: CertificateAuthority, der: Uint8Array): string {
  const { tbsFields, signatureAlgorithm, issuer } = certificateParts(der);
  const tbs = sequence(tbsFields.map((field) => (field === issuer ? ca.subject : field)));
  // DER signatures, as X.509 stores them (ECDSA's r and s as a SEQUENCE of INTEGERs).
  const signature = sign(ca.signing.hash, tbs, { key: ca.privateKey, dsaEncoding: "der" });
  return x509.PemConverter.encode(sequence([tbs, signatureAlgorithm, bitString(signature)]).buffer as ArrayBuffer, "CERTIFICATE");
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

/**
 * Whether `pem` chains to this CA certificate as Go's crypto/x509 (etcd) sees it: its issuer is
 * the CA's subject byte for byte, its authority key identifier is the CA's subject key identifier
 * when the CA has one, and the CA's key verifies its signature.
 */
export async function signedBy(pem: string, caPem: string): Promise<boolean> {
  try {
    const cert = new NodeCertificate(pem);
    const ca = new NodeCertificate(caPem);
    if (!Buffer.from(certificateParts(cert.raw).issuer).equals(certificateParts(ca.raw).subject)) return false;
    const ski = new x509.X509Certificate(caPem).getExtension(x509.SubjectKeyIdentifierExtension)?.keyId;
    const aki = new x509.X509Certificate(pem).getExtension(x509.AuthorityKeyIdentifierExtension)?.keyId;
    if (ski && aki !== ski) return false;
    return cert.verify(ca.publicKey);
  } catch {
    return false;
  }
}

/** Whether the certificate and the key (PEM) belong together. */
export async function keyMatches(certPem: string, keyPem: string): Promise<boolean> {
  try {
    return new NodeCertificate(certPem).checkPrivateKey(createPrivateKey(keyPem));
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
