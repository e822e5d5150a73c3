/**
 * The certificates of an etcd cluster run with TLS on every port: a CA, and per node a peer
 * certificate (the peer port, both ends of each connection, and the node's own client identity)
 * and a server certificate (the client port, and the client etcd's own JSON gateway presents to
 * the gRPC server behind it). Both name the node, which no etcd user is: with etcd's auth on
 * they get nothing but the member list and status. On request, a client certificate for the
 * node's API server (`kube-apiserver`, etcd's user of that name). The keys
 * this package makes are ECDSA P-256; a request may bring ECDSA P-256 or P-384, or RSA of 2048 to
 * 8192 bits (what Go's TLS, and so etcd, takes), and nothing else.
 *
 * What a certificate names is decided here from the identity the caller vouches for, never copied
 * from a request: a certificate request only proves that its sender holds the key. The checks
 * are the Go signer's too (integrations/go/joinhandler), held to the same vectors
 * (integrations/vectors/signer-vectors.json).
 * @module
 */
import "reflect-metadata"; // @peculiar/x509's dependency injection needs the Reflect metadata API.
import * as x509 from "@peculiar/x509";
import { isIP } from "node:net";
import { canonicalIpv6, ipv6Groups } from "../../shared/protocol/peer-url.ts";
import { X509Certificate as NodeCertificate, createPrivateKey, createPublicKey, randomBytes, sign } from "node:crypto";
import { loadCertificateAuthority, type CertificateAuthority } from "./ca.ts";
import { bitString, certificateParts, children, sequence } from "./der.ts";

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

export type CertificateKind = "peer" | "server" | "client";

/** The etcd user (and common name) of the API servers' client certificates. */
export const API_SERVER_USER = "kube-apiserver";
/** The keys a request may bring, in words for refusals. */
export const ACCEPTED_KEYS = "ECDSA P-256 or P-384, or RSA of 2048 to 8192 bits";
/** A request naming more subject alternative names than this is refused before they are compared. */
export const MAX_REQUESTED_NAMES = 16;
const RSA_BITS = { min: 2048, max: 8192 } as const;
const ACCEPTED_HASHES: ReadonlySet<string> = new Set(["SHA-256", "SHA-384", "SHA-512"]);

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
export async function createCertificateAuthority(
  commonName: string,
  validDays: number,
  now = Date.now(),
): Promise<{ ca: CertificateAuthority; keyPem: string }> {
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
    extensions: identity.hosts.length ? [new x509.SubjectAlternativeNameExtension(identity.hosts.map(generalName))] : [],
  });
  return csr.toString("pem");
}

/** A request whose signature holds and whose names are all allowed: its key and the hosts it asked for. */
export interface CheckedRequest {
  publicKey: CryptoKey;
  /** The request's SubjectPublicKeyInfo, DER, to tell one key from another. */
  spki: ArrayBuffer;
  /** RSA keys also get keyEncipherment (TLS 1.2's RSA key exchange). */
  rsa: boolean;
  /** What it asked for within what is allowed: canonical (lower case; IPv6 as RFC 5952 writes it), each once. */
  hosts: string[];
}

/**
 * Checks a request against the names allowed; throws CertificateRequestError when it fails. In
 * this order, as the Go signer does: a PEM PKCS#10 request, signed (ECDSA or RSA PKCS#1 v1.5) over
 * SHA-256/384/512, with a
 * key of ACCEPTED_KEYS, whose signature holds; at most MAX_REQUESTED_NAMES subject alternative
 * names; every common name the allowed one; every name a DNS name or IP address that is allowed
 * (an IPv4-mapped IPv6 address never is).
 */
export async function checkCertificateRequest(pem: string, kind: CertificateKind, allowed: CertificateIdentity): Promise<CheckedRequest> {
  const bad = (why: string) => new CertificateRequestError("invalid_csr", `the ${kind} certificate request ${why}`);
  let csr: x509.Pkcs10CertificateRequest;
  let names: { type: string; value: string }[];
  try {
    csr = new x509.Pkcs10CertificateRequest(pem);
    names = requestedNames(csr);
  } catch (e) {
    throw bad(`is not a PEM PKCS#10 request: ${(e as Error).message}`);
  }
  const signature = csr.signatureAlgorithm as { name?: string; hash?: { name?: string } };
  if (!ACCEPTED_HASHES.has(signature.hash?.name ?? "") || !["ECDSA", "RSASSA-PKCS1-v1_5"].includes(signature.name ?? "")) {
    throw bad(`is signed with ${describeAlgorithm(signature)}: only ECDSA or RSA PKCS#1 v1.5 signatures over SHA-256, SHA-384 or SHA-512 are accepted`);
  }
  const key = keyKind(csr.publicKey.algorithm as { name?: string; namedCurve?: string }, csr.publicKey.rawData);
  if (!key.ok) throw bad(`has ${key.what}; accepted are ${ACCEPTED_KEYS}`);
  let publicKey: CryptoKey;
  try {
    publicKey = await csr.publicKey.export(key.rsa ? { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" } : csr.publicKey.algorithm, ["verify"], provider);
    if (!(await csr.verify(provider))) throw new Error("its signature does not verify");
  } catch (e) {
    throw bad(`is unusable: ${(e as Error).message}`);
  }
  if (names.length > MAX_REQUESTED_NAMES) throw bad(`names ${names.length} subject alternative names; at most ${MAX_REQUESTED_NAMES} are read`);
  const common = csr.subjectName.getField("CN");
  if (common.some((cn) => cn !== allowed.node)) {
    throw new CertificateRequestError(
      "csr_name_not_allowed",
      `the ${kind} certificate request names ${common.join(", ")}; this admission is for ${kind === "client" ? "the API server's client certificate, common name" : "node"} ${allowed.node}`,
    );
  }
  const hosts: string[] = [];
  for (const name of names) {
    const host = allowedName(name, allowed.hosts);
    if (host === null) {
      const what =
        name.type === "ip" && isMappedIpv4(name.value)
          ? `${name.value} (an IPv4-mapped IPv6 address)`
          : name.type === "ip" || name.type === "dns"
            ? name.value
            : `${name.type} ${name.value}`;
      throw new CertificateRequestError(
        "csr_name_not_allowed",
        `the ${kind} certificate request asks for ${what}; this admission allows ${allowed.hosts.length ? `only ${allowed.hosts.join(", ")}` : "no subject alternative name in it"}`,
      );
    }
    if (!hosts.includes(host)) hosts.push(host);
  }
  return { publicKey, spki: csr.publicKey.rawData, rsa: key.rsa, hosts };
}

/** Whether two checked requests bring the same key (each certificate of a node has its own). */
export function sameKey(a: CheckedRequest, b: CheckedRequest): boolean {
  return Buffer.from(a.spki).equals(Buffer.from(b.spki));
}

type KeyKind = { ok: true; rsa: boolean } | { ok: false; what: string };

function keyKind(alg: { name?: string; namedCurve?: string }, spki: ArrayBuffer): KeyKind {
  if (alg.name === "ECDSA" && (alg.namedCurve === "P-256" || alg.namedCurve === "P-384")) return { ok: true, rsa: false };
  if (alg.name === "ECDSA") return { ok: false, what: `an ECDSA key on curve ${alg.namedCurve ?? "?"}` };
  if (alg.name === "RSASSA-PKCS1-v1_5") {
    // The modulus's exact length (the library rounds it to whole bytes).
    let bits = 0;
    try {
      bits = createPublicKey({ key: Buffer.from(spki), format: "der", type: "spki" }).asymmetricKeyDetails?.modulusLength ?? 0;
    } catch {
      return { ok: false, what: "an RSA key that cannot be read" };
    }
    return bits >= RSA_BITS.min && bits <= RSA_BITS.max ? { ok: true, rsa: true } : { ok: false, what: `an RSA key of ${bits} bits` };
  }
  if (alg.name === "RSA-PSS") return { ok: false, what: "an RSA-PSS key (id-RSASSA-PSS)" };
  if (alg.name === "Ed25519" || alg.name === "Ed448") return { ok: false, what: `an ${alg.name} key` };
  // Curves the library does not name (P-224, brainpool…) come back as the bare id-ecPublicKey OID.
  if (alg.name === "1.2.840.10045.2.1") return { ok: false, what: "an ECDSA key on another curve than P-256 or P-384" };
  return { ok: false, what: `a key of type ${alg.name ?? "?"}` };
}

function describeAlgorithm(a: { name?: string; hash?: { name?: string } }): string {
  return a.hash?.name ? `${a.name} with ${a.hash.name}` : (a.name ?? "an unknown algorithm");
}

/** The allowed host this requested name is (canonical), or null. A DNS name matches only DNS names, an address only addresses. */
function allowedName(name: { type: string; value: string }, allowed: readonly string[]): string | null {
  if (name.type === "dns") {
    const host = name.value.toLowerCase();
    return allowed.some((a) => !isIP(bareHost(a)) && bareHost(a).toLowerCase() === host) ? host : null;
  }
  if (name.type === "ip") {
    const host = canonicalIp(name.value);
    if (host === null || isMappedIpv4(name.value)) return null;
    return allowed.some((a) => isIP(bareHost(a)) !== 0 && canonicalIp(bareHost(a)) === host) ? host : null;
  }
  return null;
}

/** An IP address as Go prints it (net.IP.String): a dotted quad, or IPv6 as RFC 5952 writes it. */
function canonicalIp(text: string): string | null {
  if (isIP(text) === 4) return text;
  return isIP(text) === 6 ? canonicalIpv6(text) : null;
}

function isMappedIpv4(text: string): boolean {
  const g = isIP(text) === 6 ? ipv6Groups(text) : null;
  if (g === null) return false;
  return g.slice(0, 5).every((n) => n === 0) && g[5] === 0xffff;
}

/** What a certificate of each kind may be used for (extended key usage). */
export const KIND_USAGES: Readonly<Record<CertificateKind, readonly string[]>> = {
  // etcd presents the peer certificate at both ends of a peer connection; the node also uses it
  // as its own client identity (no etcd user has a node's name, so etcd grants it no right).
  peer: [x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth],
  // The client port's, and a client's too: etcd's own JSON gateway presents it when it calls the
  // gRPC server behind it (3.4 has no --client-cert-file to give it another), so it must carry
  // clientAuth. As a client it names the node, which no etcd user is: no right.
  server: [x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth],
  client: [x509.ExtendedKeyUsage.clientAuth],
};

/** A fresh serial number: 16 random bytes, positive, no leading zero byte (hex, as the certificate carries it). */
export function newSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0]! & 0x7f) | 0x01;
  return bytes.toString("hex");
}

/**
 * A certificate of `kind` for `identity` on `publicKey`, signed by the CA with the algorithm its
 * key calls for: CN = the identity's node (for `client`, the API server's user, with the node as
 * OU), the identity's hosts as subject alternative names, not a CA, the kind's usages;
 * keyEncipherment for RSA keys only. Its issuer is the CA's subject byte for byte and its
 * authority key identifier the CA's subject key identifier (none when the CA has none, as Go's
 * crypto/x509 does): Go finds a certificate's parent by those bytes, not by what they spell.
 */
export async function issueCertificate(
  ca: CertificateAuthority,
  publicKey: CryptoKey,
  identity: CertificateIdentity,
  validDays: number,
  now = Date.now(),
  options: { kind?: CertificateKind | "anonymous" | "root"; serial?: string; rsa?: boolean } = {},
): Promise<string> {
  const kind = options.kind ?? "peer";
  const notAfter = Math.min(now + validDays * 86_400_000, ca.cert.notAfter.getTime());
  const usage = x509.KeyUsageFlags.digitalSignature | (options.rsa ? x509.KeyUsageFlags.keyEncipherment : 0);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: options.serial ?? newSerial(),
    subject: subjectOf(kind, identity.node),
    // Re-encoded by the library (an openssl UTF8String may become a PrintableString): the stored bytes replace it below.
    issuer: ca.cert.subjectName,
    notBefore: new Date(now - BACKDATE_MS),
    notAfter: new Date(notAfter),
    publicKey,
    signingKey: ca.signingKey,
    signingAlgorithm: ca.signing.signingAlgorithm,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(usage, true),
      new x509.ExtendedKeyUsageExtension([...(kind === "anonymous" || kind === "root" ? KIND_USAGES.client : KIND_USAGES[kind])]),
      // DNS names before addresses, as Go's x509 writes them: both signers issue the same names in the same order.
      ...(identity.hosts.length ? [new x509.SubjectAlternativeNameExtension(sortedNames(identity.hosts).map(generalName))] : []),
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
  /** Hex, as the certificate carries it. */
  serial: string;
  hosts: string[];
  notAfter: number;
  issuer: string;
}

export function certificateFacts(pem: string): CertificateFacts {
  const cert = new x509.X509Certificate(pem);
  return {
    commonName: cert.subjectName.getField("CN")[0] ?? "",
    serial: cert.serialNumber,
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

/** Every subject alternative name of the request, of every type, as asked. */
function requestedNames(csr: x509.Pkcs10CertificateRequest): { type: string; value: string }[] {
  const san = csr.extensions.find((e): e is x509.SubjectAlternativeNameExtension => e instanceof x509.SubjectAlternativeNameExtension);
  return san ? san.names.items.map((n) => ({ type: n.type, value: n.value })) : [];
}

function namesOf(san: x509.SubjectAlternativeNameExtension | null): string[] {
  if (!san) return [];
  return san.names.items.map((n) => n.value);
}

/**
 * A node's certificates name it as their CN; the API server's client certificate names its etcd
 * user, with the node as OU; an anonymous client certificate (a CA key holder's own etcd client,
 * etcd-identities.ts) names no user at all.
 */
function subjectOf(kind: CertificateKind | "anonymous" | "root", node: string): x509.JsonName {
  if (kind === "client") return [{ CN: [API_SERVER_USER] }, { OU: [node] }];
  if (kind === "root") return [{ CN: ["root"] }, { OU: [node] }];
  if (kind === "anonymous") return [{ O: ["etcd-join-broker"] }, { OU: [node] }];
  return [{ CN: [node] }];
}

function sortedNames(hosts: readonly string[]): string[] {
  return [...hosts.filter((h) => !isIP(bareHost(h))), ...hosts.filter((h) => isIP(bareHost(h)))];
}

function generalName(host: string): { type: "ip" | "dns"; value: string } {
  return { type: isIP(bareHost(host)) ? "ip" : "dns", value: bareHost(host) };
}

function bareHost(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

function serial(): string {
  return newSerial();
}

/** A certificate revocation list as etcd reads it (`--client-crl-file`, `--peer-crl-file`): DER. */
export interface RevocationList {
  der: Uint8Array;
  /** Its CRL number: a newer list has a higher one. */
  number: bigint;
  /** The serials it lists (hex, lower case, as newSerial writes them). */
  serials: string[];
  thisUpdate: number;
}

const CRL_NUMBER = "2.5.29.20";

/**
 * A revocation list of these serials, signed by the CA. DER: etcd 3.6 and later read only that
 * (x509.ParseRevocationList); 3.4 and 3.5 take DER or PEM. etcd reads the serials and nothing
 * else (not the signature, not the dates): the agent checks the signature before it writes one.
 */
export async function createRevocationList(
  ca: CertificateAuthority,
  entries: readonly { serial: string; revokedAt: number }[],
  number: bigint,
  now = Date.now(),
): Promise<RevocationList> {
  const crl = await x509.X509CrlGenerator.create({
    issuer: ca.cert.subjectName.toString(),
    thisUpdate: new Date(now),
    nextUpdate: new Date(now + 7 * 86_400_000),
    entries: entries.map((e) => ({ serialNumber: e.serial.toLowerCase(), revocationDate: new Date(e.revokedAt) })),
    signingKey: ca.signingKey,
    signingAlgorithm: ca.signing.signingAlgorithm,
    extensions: [
      ...(ca.subjectKeyId ? [new x509.AuthorityKeyIdentifierExtension(ca.subjectKeyId)] : []),
      new x509.Extension(CRL_NUMBER, false, derInteger(number)),
    ],
  });
  return { der: crlWithIssuerOf(ca, new Uint8Array(crl.rawData)), number, serials: entries.map((e) => e.serial.toLowerCase()), thisUpdate: now };
}

/** The list with the CA's subject bytes as its issuer, signed again over that (as withIssuerOf does for certificates). */
function crlWithIssuerOf(ca: CertificateAuthority, der: Uint8Array): Uint8Array {
  const [tbs, signatureAlgorithm] = children(der);
  if (!tbs || !signatureAlgorithm) throw new Error("DER: not a revocation list");
  const fields = children(tbs);
  const issuerAt = fields[0]?.[0] === 0x02 ? 2 : 1; // after the (v2) version and the signature algorithm
  const signed = sequence(fields.map((field, i) => (i === issuerAt ? ca.subject : field)));
  const signature = sign(ca.signing.hash, signed, { key: ca.privateKey, dsaEncoding: "der" });
  return sequence([signed, signatureAlgorithm, bitString(signature)]);
}

/** A revocation list this CA signed (DER or PEM); throws when it is not one. */
export async function readRevocationList(data: Uint8Array | string, caPem: string): Promise<RevocationList> {
  const crl = new x509.X509Crl(typeof data === "string" ? data : new Uint8Array(data));
  const ca = new x509.X509Certificate(caPem);
  if (!(await crl.verify({ publicKey: await ca.publicKey.export(provider) }, provider)))
    throw new Error(`the revocation list is not signed by the CA ${ca.subject}`);
  const numberExt = crl.getExtension(CRL_NUMBER);
  return {
    der: new Uint8Array(crl.rawData),
    number: numberExt ? readDerInteger(new Uint8Array(numberExt.value)) : -1n,
    serials: crl.entries.map((e) => normalSerial(e.serialNumber)),
    thisUpdate: crl.thisUpdate.getTime(),
  };
}

/** A serial as hex without leading zero bytes, lower case: the number etcd compares. */
export function normalSerial(hex: string): string {
  const s = hex.toLowerCase().replace(/^(00)+/, "");
  return s === "" ? "00" : s;
}

function derInteger(n: bigint): Uint8Array {
  if (n < 0n) return new Uint8Array([0x02, 0x01, 0xff]); // -1: a placeholder's, lower than any list's
  let hex = n.toString(16);
  if (hex.length % 2) hex = `0${hex}`;
  let bytes = Buffer.from(hex, "hex");
  if (bytes[0]! & 0x80) bytes = Buffer.concat([Buffer.from([0]), bytes]);
  return new Uint8Array([0x02, bytes.length, ...bytes]);
}

function readDerInteger(der: Uint8Array): bigint {
  if (der[0] !== 0x02 || der[1]! > 0x7f) throw new Error("the CRL number is not a short DER INTEGER");
  const bytes = der.subarray(2, 2 + der[1]!);
  const value = BigInt(`0x${Buffer.from(bytes).toString("hex") || "0"}`);
  return bytes[0]! & 0x80 ? value - (1n << BigInt(bytes.length * 8)) : value;
}
