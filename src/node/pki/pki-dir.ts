/**
 * A node's `--pki-dir`: the cluster's etcd CA certificate, and where the node holds it, the CA
 * key; the node's own peer and server certificates with their keys, made on the node.
 *
 *   ca.crt  ca.key            the cluster's etcd CA (ca.key only where it was made or put)
 *   peer.crt  peer.key        etcd's peer port, both ends, and the node's own etcd client identity
 *   server.crt  server.key    etcd's client port (and the client its JSON gateway presents)
 *   apiserver-etcd-client.crt .key   with --apiserver-etcd-client: kube-apiserver's client
 *                             certificate (etcd user kube-apiserver)
 *   crl.der                   the certificates etcd refuses (DER, as every etcd version reads
 *                             it), kept current by the agent from the join API's list
 * @module
 */
import { X509Certificate } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import { writeFileAtomic, writeFilesAtomic } from "../atomic-file.ts";
import {
  certificateFacts,
  createCertificateAuthority,
  createCertificateRequest,
  generateKeyPair,
  issueCertificate,
  keyMatches,
  normalSerial,
  readRevocationList,
  signedBy,
  type CertificateFacts,
  type CertificateKind,
  type KeyPair,
} from "./x509.ts";
import { loadCertificateAuthority, PkiError, type CertificateAuthority } from "./ca.ts";
import type { NodeIdentity } from "./identity.ts";
import type { CertificateRequests, IssuedCertificates } from "../../shared/protocol/join-api.ts";

/** A CA made by a bootstrap node lasts this long. */
export const CA_VALID_DAYS = 10 * 365;
/** A node's own certificates, when it signs them itself (the bootstrap node). */
export const NODE_CERT_VALID_DAYS = 365;
/** Certificates closer than this to their end are made again when the node joins. */
const RENEW_BEFORE_MS = 7 * 86_400_000;

export interface PkiFiles {
  ca: string;
  caKey: string;
  peerCert: string;
  peerKey: string;
  serverCert: string;
  serverKey: string;
  apiServerCert: string;
  apiServerKey: string;
  crl: string;
}

export function pkiFiles(dir: string): PkiFiles {
  return {
    ca: join(dir, "ca.crt"),
    caKey: join(dir, "ca.key"),
    peerCert: join(dir, "peer.crt"),
    peerKey: join(dir, "peer.key"),
    serverCert: join(dir, "server.crt"),
    serverKey: join(dir, "server.key"),
    apiServerCert: join(dir, "apiserver-etcd-client.crt"),
    apiServerKey: join(dir, "apiserver-etcd-client.key"),
    crl: join(dir, "crl.der"),
  };
}

/**
 * The CA pair in `dir` (ca.crt, ca.key), checked as usable now (ca.ts); throws PkiError naming
 * the file and what is wrong with it.
 */
export async function readCertificateAuthority(dir: string, now = Date.now()): Promise<CertificateAuthority> {
  const files = pkiFiles(dir);
  const read = (file: string): string => {
    try {
      return readFileSync(file, "utf8");
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOENT") throw new PkiError("ca_incomplete", `${file} missing: the etcd CA is a pair of PEM files, ca.crt and ca.key`);
      throw new PkiError("ca_unreadable", `cannot read ${file}: ${code === "EACCES" ? "permission denied" : (e as Error).message}`);
    }
  };
  return await loadCertificateAuthority(read(files.ca), read(files.caKey), { certFile: files.ca, keyFile: files.caKey, now });
}

/** Loads the CA from `dir`; `create` makes one there when neither file exists. */
export async function certificateAuthority(
  dir: string,
  options: { create?: { commonName: string } } = {},
): Promise<{ ca: CertificateAuthority; created: boolean }> {
  const files = pkiFiles(dir);
  const haveCert = existsSync(files.ca);
  const haveKey = existsSync(files.caKey);
  if (haveCert && haveKey) return { ca: await readCertificateAuthority(dir), created: false };
  if (haveCert || haveKey || !options.create) {
    const missing = [haveCert ? null : files.ca, haveKey ? null : files.caKey].filter(Boolean).join(" and ");
    throw new PkiError(
      "ca_incomplete",
      `${missing} missing: the etcd CA is a pair of PEM files, ca.crt and ca.key${haveCert && !haveKey ? " (a node that only trusts this CA cannot sign for itself)" : ""}`,
    );
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const { ca, keyPem } = await createCertificateAuthority(options.create.commonName, CA_VALID_DAYS);
  // The key first: a certificate without its key would read as an operator's incomplete pair.
  writeFileAtomic(files.caKey, keyPem);
  writeFileAtomic(files.ca, ca.certPem);
  return { ca, created: true };
}

/**
 * Whether the node's certificates in `dir` are there, belong to their keys, chain to `ca.crt`,
 * name exactly this identity, last at least another week and are not on the revocation list
 * (its member was removed): then nothing is asked or signed.
 */
export async function haveUsableCertificates(dir: string, identity: NodeIdentity, now = Date.now()): Promise<boolean> {
  const files = pkiFiles(dir);
  const kinds = (["peer", "server", "client"] as const).filter((k) => identity[k]);
  if (![files.ca, ...kinds.flatMap((k) => [certFile(files, k), keyFile(files, k)])].every((f) => existsSync(f))) return false;
  const caPem = readFileSync(files.ca, "utf8");
  const revoked = existsSync(files.crl)
    ? await readRevocationList(new Uint8Array(readFileSync(files.crl)), caPem).then(
        (l) => l.serials,
        () => [],
      )
    : [];
  for (const kind of kinds) {
    const certPem = readFileSync(certFile(files, kind), "utf8");
    const keyPem = readFileSync(keyFile(files, kind), "utf8");
    let facts: CertificateFacts;
    try {
      facts = certificateFacts(certPem);
    } catch {
      return false;
    }
    if (revoked.includes(normalSerial(facts.serial))) return false;
    const want = identity[kind]!;
    const sameHosts = facts.hosts.length === want.hosts.length && want.hosts.every((h) => facts.hosts.includes(h));
    if (facts.commonName !== want.node || !sameHosts || facts.notAfter - now < RENEW_BEFORE_MS) return false;
    if (!(await keyMatches(certPem, keyPem)) || !(await signedBy(certPem, caPem))) return false;
  }
  return true;
}

/** The bootstrap node signs its own certificates with the CA it holds (for keys made already, or fresh ones), all at once. */
export async function issueOwnCertificates(dir: string, ca: CertificateAuthority, identity: NodeIdentity, keys?: PendingCertificates): Promise<void> {
  const pending = keys ?? (await requestCertificates(identity));
  const now = Date.now();
  const [peer, server, client] = await Promise.all([
    issueCertificate(ca, pending.keys.peer.keys.publicKey, identity.peer, NODE_CERT_VALID_DAYS, now, { kind: "peer" }),
    issueCertificate(ca, pending.keys.server.keys.publicKey, identity.server, NODE_CERT_VALID_DAYS, now, { kind: "server" }),
    pending.keys.client
      ? issueCertificate(ca, pending.keys.client.keys.publicKey, { node: identity.peer.node, hosts: [] }, NODE_CERT_VALID_DAYS, now, { kind: "client" })
      : null,
  ]);
  const issued: IssuedCertificates = { ca: ca.certPem, peer, server, ...(client ? { client } : {}) };
  await pending.save(dir, issued);
}

function certFile(files: PkiFiles, kind: CertificateKind): string {
  return kind === "peer" ? files.peerCert : kind === "server" ? files.serverCert : files.apiServerCert;
}

function keyFile(files: PkiFiles, kind: CertificateKind): string {
  return kind === "peer" ? files.peerKey : kind === "server" ? files.serverKey : files.apiServerKey;
}

/** Fresh keys and their certificate requests; `save` writes them with the certificates signed for them. */
export interface PendingCertificates {
  requests: CertificateRequests;
  keys: Record<Exclude<CertificateKind, "client">, KeyPair> & { client?: KeyPair };
  /** Writes the keys, then the certificates (never a certificate without its key on disk). */
  save(dir: string, issued: IssuedCertificates): Promise<void>;
}

export async function requestCertificates(identity: NodeIdentity): Promise<PendingCertificates> {
  const keys = { peer: await generateKeyPair(), server: await generateKeyPair(), ...(identity.client ? { client: await generateKeyPair() } : {}) };
  const requests = {
    peer: await createCertificateRequest(keys.peer, identity.peer),
    server: await createCertificateRequest(keys.server, identity.server),
    ...(identity.client && keys.client ? { client: await createCertificateRequest(keys.client, identity.client) } : {}),
  };
  return {
    requests,
    keys,
    async save(dir, issued) {
      const files = pkiFiles(dir);
      if (existsSync(files.caKey) && existsSync(files.ca) && !holdsCertificate(files.ca, issued.ca)) {
        throw new PkiError(
          "certificate_mismatch",
          `the join API signed with another CA than the one in ${files.ca} (beside ${files.caKey}): each cluster has one etcd CA`,
        );
      }
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      // Keys before their certificates: a certificate is never on disk without its own key. The
      // files' contents are flushed at once (a node's etcd starts only once they are there). The
      // operator's CA certificate (kubeadm's, say) stays as it is when it is this one.
      await writeFilesAtomic([
        [
          { path: files.peerKey, content: keys.peer.keyPem },
          { path: files.serverKey, content: keys.server.keyPem },
          ...(keys.client ? [{ path: files.apiServerKey, content: keys.client.keyPem }] : []),
        ],
        [
          { path: files.peerCert, content: issued.peer },
          { path: files.serverCert, content: issued.server },
          ...(keys.client && issued.client ? [{ path: files.apiServerCert, content: issued.client }] : []),
          ...(holdsCertificate(files.ca, issued.ca) ? [] : [{ path: files.ca, content: issued.ca }]),
        ],
      ]);
    },
  };
}

/** Whether `file` exists and its (first) certificate is the one in `pem`, however either is laid out. */
function holdsCertificate(file: string, pem: string): boolean {
  try {
    return new X509Certificate(readFileSync(file)).raw.equals(new X509Certificate(pem).raw);
  } catch {
    return false;
  }
}

/**
 * The files etcd is started with (etcdFlags' `tls`); the revocation list only when asked for
 * and there: etcd refuses every connection when the list it was told to read is missing.
 */
export function etcdServingFiles(
  dir: string,
  options: { revocationList?: boolean } = {},
): { caFile: string; certFile: string; keyFile: string; peerCertFile: string; peerKeyFile: string; crlFile?: string } {
  const f = pkiFiles(dir);
  const files = { caFile: f.ca, certFile: f.serverCert, keyFile: f.serverKey, peerCertFile: f.peerCert, peerKeyFile: f.peerKey };
  return options.revocationList && existsSync(f.crl) ? { ...files, crlFile: f.crl } : files;
}

/**
 * The node's own etcd client credentials: its peer certificate. No etcd user has a node's name,
 * so with etcd's auth on it is a client without a role: it reads the member list and status
 * (over gRPC), and nothing else.
 */
export function ownClientFiles(dir: string): { ca: string; cert: string; key: string } {
  const f = pkiFiles(dir);
  return { ca: f.ca, cert: f.peerCert, key: f.peerKey };
}

/**
 * Moves the node's own keys and certificates aside (never deletes them): its member was removed,
 * so they are on the revocation list, and the next add asks for new ones.
 */
export function setOwnCertificatesAside(dir: string, suffix: string): string[] {
  const f = pkiFiles(dir);
  const moved: string[] = [];
  for (const path of [f.peerCert, f.serverCert, f.apiServerCert, f.peerKey, f.serverKey, f.apiServerKey]) {
    if (!existsSync(path)) continue;
    renameSync(path, `${path}.${suffix}`);
    moved.push(path);
  }
  return moved;
}
