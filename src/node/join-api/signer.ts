/**
 * The join API as the only issuer of joiners' etcd certificates. It signs a node's requests only
 * for the identity its verified admission names: common name = the node, the peer certificate
 * for the admitted peer URL's host, the server certificate for that host and loopback (etcd
 * serves clients on the node's own address and on 127.0.0.1). The certificates are built from
 * that identity; a request contributes its public key and the proof that its sender holds it.
 * @module
 */
import type { CertificateRequests, IssuedCertificates } from "../../shared/protocol/join-api.ts";
import { readCertificateAuthority } from "../pki/pki-dir.ts";
import { allowedIdentity } from "../pki/identity.ts";
import { CertificateRequestError, checkCertificateRequest, issueCertificate, type CheckedRequest } from "../pki/x509.ts";
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

  /** The CA, as a log line names it: its subject, key and signature algorithm, and its end. */
  describe(): string {
    const { cert, signing } = this.ca;
    return `${cert.subject} (${signing.key}, signs with ${signing.algorithm}, valid until ${cert.notAfter.toISOString()})`;
  }

  /** Checks both requests against the admitted identity; the public keys to sign, or the refusal. */
  async check(csrs: CertificateRequests, node: string, peerURL: string): Promise<Outcome<CheckedRequests>> {
    const allowed = allowedIdentity(node, peerURL);
    try {
      const peer = await checkCertificateRequest(csrs.peer, "peer", allowed.peer);
      const server = await checkCertificateRequest(csrs.server, "server", allowed.server);
      return { ok: true, value: { node, peerURL, peer, server } };
    } catch (e) {
      if (!(e instanceof CertificateRequestError)) throw e;
      return refuse(e.code === "invalid_csr" ? 400 : 422, e.code, e.message);
    }
  }

  /**
   * The certificates for requests `check` accepted. The peer certificate names exactly the
   * admitted peer host; the server certificate what its request asked within what `check`
   * allowed (the peer host when it asked for nothing).
   */
  async issue(checked: CheckedRequests): Promise<IssuedCertificates> {
    const now = this.now();
    const { peer, server } = allowedIdentity(checked.node, checked.peerURL);
    const serverHosts = checked.server.hosts.length ? checked.server.hosts : peer.hosts;
    const [peerPem, serverPem] = await Promise.all([
      issueCertificate(this.ca, checked.peer.publicKey, peer, this.validDays, now),
      issueCertificate(this.ca, checked.server.publicKey, { node: server.node, hosts: serverHosts }, this.validDays, now),
    ]);
    return { ca: this.ca.certPem, peer: peerPem, server: serverPem };
  }
}

export interface CheckedRequests {
  node: string;
  peerURL: string;
  peer: CheckedRequest;
  server: CheckedRequest;
}

/** Refused before etcd is touched: requests sent where no CA is held. */
export function noSigner<T>(): Outcome<T> {
  return refuse(422, "certificates_unavailable", "this join API holds no etcd CA (start it with --pki-dir DIR holding ca.crt and ca.key), so it cannot sign the certificate requests sent with this add");
}
