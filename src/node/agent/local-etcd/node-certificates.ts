/**
 * A node's etcd certificates with --pki-dir: the bootstrap node's CA and its own certificates,
 * a joiner's requests (fresh keys, kept in memory until signed) and what the join API signed.
 * The keys and their requests are made while the node waits for its turn (`NodeKeys`), so that
 * neither role makes them after it is admitted.
 * @module
 */
import type { MemberAdded } from "../../../shared/protocol/join-api.ts";
import { requestedIdentity, type NodeIdentity } from "../../pki/identity.ts";
import { existsSync } from "node:fs";
import {
  certificateAuthority,
  haveUsableCertificates,
  issueOwnCertificates,
  pkiFiles,
  readCertificateAuthority,
  requestCertificates,
  type PendingCertificates,
} from "../../pki/pki-dir.ts";
import { Refusal } from "../core/errors.ts";
import type { AgentOptions } from "../core/agent-options.ts";
import type { Reporter } from "../core/progress.ts";
import type { RevocationListKeeper } from "./revocation-list.ts";

/**
 * Before anything is asked of the broker: a CA pair the operator put in --pki-dir must be one this
 * node can sign its certificates with, should the broker let it bootstrap. A pair that cannot
 * (ca.ts says why, naming the file) is refused now (PkiError, exit 3), not once the node holds
 * the cluster's bootstrap ticket. A directory with neither file, or only the CA certificate (a
 * joiner's), has nothing to check yet.
 */
export async function checkOperatorCa(o: AgentOptions, r: Reporter): Promise<void> {
  const dir = o.pkiDir;
  if (!dir) return;
  const files = pkiFiles(dir);
  if (!existsSync(files.caKey)) return;
  const ca = await readCertificateAuthority(dir);
  r.event(
    "pki",
    `the etcd CA in ${dir} (${ca.cert.subject}; ${ca.signing.key}, signs with ${ca.signing.algorithm}; valid until ${ca.cert.notAfter.toISOString()}) can sign this node's certificates`,
    {
      dir,
      key: ca.signing.key,
      notAfter: ca.cert.notAfter.toISOString(),
    },
  );
}

/**
 * This node's fresh keys and certificate requests, made once, in memory, from the moment the
 * agent starts: they are saved only with certificates signed for them (by the bootstrap node
 * itself or by the join API), and a node that stops before then makes fresh ones next time.
 */
export class NodeKeys {
  readonly identity: NodeIdentity;
  #pending: Promise<PendingCertificates> | null = null;

  constructor(o: AgentOptions) {
    this.identity = requestedIdentity(o.node, o.peerURL, o.clientURL, { apiServerClient: o.apiServerClient });
  }

  /** Starts making them (at most once); a failure is met by the step that needs them. */
  prepare(): void {
    this.#pending ??= requestCertificates(this.identity);
    this.#pending.catch(() => undefined);
  }

  pending(): Promise<PendingCertificates> {
    this.prepare();
    return this.#pending!;
  }
}

/** The bootstrap node's CA (made here when the operator put none) and its own certificates. */
export async function bootstrapCertificates(o: AgentOptions, r: Reporter, keys: NodeKeys, crl: RevocationListKeeper | null): Promise<void> {
  const dir = o.pkiDir;
  if (!dir) return;
  const { ca, created } = await certificateAuthority(dir, { create: { commonName: `${o.cluster} etcd CA` } });
  if (created) r.event("pki", `created the cluster's etcd CA in ${dir} (ca.crt, ca.key): keep ca.key on this node, give the join API a copy`, { dir });
  // Before etcd first starts: the list it reads (empty; the join API's, once there is one).
  await crl?.ensureOwn(ca);
  if (await haveUsableCertificates(dir, keys.identity)) return;
  await issueOwnCertificates(dir, ca, keys.identity, await keys.pending());
  r.event("pki", `signed this node's peer and server certificates with the CA in ${dir}`, { dir });
}

/** A joiner's certificate requests, unless it holds usable certificates already (null). */
export async function certificatesToRequest(o: AgentOptions, keys: NodeKeys): Promise<PendingCertificates | null> {
  const dir = o.pkiDir;
  if (!dir) return null;
  if (await haveUsableCertificates(dir, keys.identity)) return null;
  return await keys.pending();
}

/** Saves what the join API signed for these keys; an answer without certificates is a join API without a CA. */
export async function saveCertificates(o: AgentOptions, r: Reporter, pending: PendingCertificates, added: MemberAdded): Promise<void> {
  const dir = o.pkiDir!;
  if (!added.certificates) {
    throw new Refusal(
      `the join API ${o.joinApiUrl} added this node but signed no certificates: etcd runs on TLS here (--pki-dir), so the join API needs the cluster's etcd CA (join-broker controller --pki-dir DIR)`,
    );
  }
  if (pending.requests.client && !added.certificates.client) {
    throw new Refusal(
      `the join API ${o.joinApiUrl} signed this node's certificates but not the API server's client certificate asked for (--apiserver-etcd-client): it predates that certificate`,
    );
  }
  await pending.save(dir, added.certificates);
  r.event(
    "pki",
    `the join API signed this node's peer and server certificates${added.certificates.client ? " and kube-apiserver's client certificate" : ""}; saved in ${dir}`,
    { dir },
  );
}
