/**
 * The join API as the only issuer of joiners' etcd certificates. It signs a node's requests only
 * for the identity its verified admission names: common name = the node, the peer certificate
 * for the admitted peer URL's host, the server certificate for that host and loopback (etcd
 * serves clients on the node's own address and on 127.0.0.1); on request, the client
 * certificate of the node's API server (CN = kube-apiserver, OU = the node, no names). The
 * certificates are built from that identity; a request contributes its public key and the
 * proof that its sender holds it.
 *
 * Their serial numbers are chosen when the requests are checked, before etcd is touched, so that
 * the learner's record, written right after the add and before the certificates are handed out,
 * names them while they are signed: every join API instance can
 * then tell which certificates belong to which admission and member, and list them on the
 * revocation list once that admission or member ends (ledger.ts).
 * @module
 */
import type { CertificateRequests, IssuedCertificates } from "../../shared/protocol/join-api.ts";
import { reservedNodeNameProblem } from "../../shared/protocol/identifiers.ts";
import { readCertificateAuthority } from "../pki/pki-dir.ts";
import { allowedIdentity } from "../pki/identity.ts";
import { API_SERVER_USER, CertificateRequestError, checkCertificateRequest, issueCertificate, newSerial, sameKey, type CheckedRequest } from "../pki/x509.ts";
import type { CertificateAuthority } from "../pki/ca.ts";
import { refuse, type Outcome } from "./outcome.ts";

export const DEFAULT_CERT_VALID_DAYS = 365;

export class CertificateSigner {
  private constructor(
    readonly ca: CertificateAuthority,
    readonly validDays: number,
    readonly now: () => number,
  ) {}

  /** The CA in `DIR/ca.crt` and `DIR/ca.key`. */
  static async fromPkiDir(dir: string, options: { validDays?: number; now?: () => number } = {}): Promise<CertificateSigner> {
    const ca = await readCertificateAuthority(dir, (options.now ?? Date.now)());
    return new CertificateSigner(ca, options.validDays ?? DEFAULT_CERT_VALID_DAYS, options.now ?? Date.now);
  }

  static fromAuthority(ca: CertificateAuthority, options: { validDays?: number; now?: () => number } = {}): CertificateSigner {
    return new CertificateSigner(ca, options.validDays ?? DEFAULT_CERT_VALID_DAYS, options.now ?? Date.now);
  }

  /** The CA, as a log line names it: its subject, key and signature algorithm, and its end. */
  describe(): string {
    const { cert, signing } = this.ca;
    return `${cert.subject} (${signing.key}, signs with ${signing.algorithm}, valid until ${cert.notAfter.toISOString()})`;
  }

  /** Checks the requests against the admitted identity; the public keys to sign and their serials, or the refusal. */
  async check(csrs: CertificateRequests, node: string, peerURL: string): Promise<Outcome<CheckedRequests>> {
    // The broker issues no ticket for a reserved name; a token that names one anyway gets nothing.
    const reserved = reservedNodeNameProblem(node);
    if (reserved) return refuse(422, "csr_name_not_allowed", `${reserved}; no certificate is signed for it`);
    const allowed = allowedIdentity(node, peerURL);
    try {
      const peer = await checkCertificateRequest(csrs.peer, "peer", allowed.peer);
      const server = await checkCertificateRequest(csrs.server, "server", allowed.server);
      const client = csrs.client === undefined ? undefined : await checkCertificateRequest(csrs.client, "client", { node: API_SERVER_USER, hosts: [] });
      const keys = [peer, server, ...(client ? [client] : [])];
      if (keys.some((a, i) => keys.some((b, j) => j > i && sameKey(a, b)))) {
        return refuse(400, "invalid_csr", "two of the certificate requests bring the same key: each certificate has a key of its own");
      }
      const issuedAt = this.now();
      const notAfter = Math.min(issuedAt + this.validDays * 86_400_000, this.ca.cert.notAfter.getTime());
      const serials = { peer: newSerial(), server: newSerial(), ...(client ? { client: newSerial() } : {}) };
      return { ok: true, value: { node, peerURL, peer, server, ...(client ? { client } : {}), serials, issuedAt, notAfter } };
    } catch (e) {
      if (!(e instanceof CertificateRequestError)) throw e;
      return refuse(e.code === "invalid_csr" ? 400 : 422, e.code, e.message);
    }
  }

  /**
   * The certificates for requests `check` accepted, with the serials it chose. The peer
   * certificate names exactly the admitted peer host; the server certificate what its request
   * asked within what `check` allowed (the peer host when it asked for nothing).
   */
  async issue(checked: CheckedRequests): Promise<IssuedCertificates> {
    const { peer, server } = allowedIdentity(checked.node, checked.peerURL);
    const serverHosts = checked.server.hosts.length ? checked.server.hosts : peer.hosts;
    const days = (checked.notAfter - checked.issuedAt) / 86_400_000;
    // All at once: a node's etcd waits for every one of them.
    const [peerPem, serverPem, clientPem] = await Promise.all([
      issueCertificate(this.ca, checked.peer.publicKey, peer, days, checked.issuedAt, { kind: "peer", serial: checked.serials.peer, rsa: checked.peer.rsa }),
      issueCertificate(this.ca, checked.server.publicKey, { node: server.node, hosts: serverHosts }, days, checked.issuedAt, {
        kind: "server",
        serial: checked.serials.server,
        rsa: checked.server.rsa,
      }),
      checked.client && checked.serials.client
        ? issueCertificate(this.ca, checked.client.publicKey, { node: checked.node, hosts: [] }, days, checked.issuedAt, {
            kind: "client",
            serial: checked.serials.client,
            rsa: checked.client.rsa,
          })
        : null,
    ]);
    return { ca: this.ca.certPem, peer: peerPem, server: serverPem, ...(clientPem ? { client: clientPem } : {}) };
  }
}

export interface CheckedRequests {
  node: string;
  peerURL: string;
  peer: CheckedRequest;
  server: CheckedRequest;
  /** The API server's client certificate, when asked for. */
  client?: CheckedRequest;
  /** The serial number each certificate will carry (hex). */
  serials: { peer: string; server: string; client?: string };
  /** When they are dated (ms; the signer's clock), and when they end. */
  issuedAt: number;
  notAfter: number;
}

/** Refused before etcd is touched: requests sent where no CA is held. */
export function noSigner<T>(): Outcome<T> {
  return refuse(
    422,
    "certificates_unavailable",
    "this join API holds no etcd CA (start it with --pki-dir DIR holding ca.crt and ca.key), so it cannot sign the certificate requests sent with this add",
  );
}
