/**
 * Runs the join API on Node (@hono/node-server): wires the etcd gateway, the verifier's view of
 * the cluster and the membership logic together, listens, and closes cleanly.
 * @module
 */
import { serve } from "@hono/node-server";
import type { AddressInfo } from "node:net";
import { EtcdGateway } from "../etcd/gateway.ts";
import { ClusterTrust, revocationListStatus } from "../../shared/verifier/index.ts";
import { createJoinApi } from "./endpoints.ts";
import { Membership, type MembershipOptions } from "./members.ts";
import { CertificateSigner } from "./signer.ts";
import { CertificateLedger } from "./ledger.ts";
import { tlsFetch, tlsFetchFromMemory, type TlsFiles } from "../etcd/tls-fetch.ts";
import { readFileSync } from "node:fs";
import { pkiFiles } from "../pki/pki-dir.ts";
import { loadCertificateAuthority, type CertificateAuthority } from "../pki/x509.ts";
import { ROOT_USER, anonymousClientCertificate, etcdRootPassword } from "../pki/etcd-identities.ts";

export interface JoinApiServerOptions {
  /** etcd client URLs (`URL[,URL…]`), tried in turn. */
  etcd: string | string[];
  broker: string;
  cluster: string;
  host: string;
  /** 0 picks a free port. */
  port: number;
  clockToleranceSeconds?: number;
  /** Opt-in: accept a revocation list at most this old when the broker is unreachable (and refresh it every half of that). */
  revocationListMaxAgeSeconds?: number;
  unknownLearnerGraceSeconds?: number;
  /** How long an add or promote waits for etcd to settle before answering 503 (default 10). */
  holdSeconds?: number;
  etcdTimeoutMs?: number;
  /** The etcd CA (`DIR/ca.crt`, `DIR/ca.key`): joiners' certificate requests are signed with it. */
  pkiDir?: string;
  /** Days a signed certificate lasts (default 365). */
  certValidDays?: number;
  /** The join API's own client credentials for https etcd endpoints. */
  etcdTls?: TlsFiles;
  log?: (line: string) => void;
  /** The clock tokens are checked and certificates dated by (ms since epoch); default Date.now. */
  now?: () => number;
}

export interface JoinApiServer {
  url: string;
  port: number;
  membership: Membership;
  close(): Promise<void>;
}

/**
 * The broker's answer on an admission: its introspection or, when the broker cannot be reached
 * and the offline mode is opted in, its revocation list if recent enough (the verifier's rule).
 * null when neither can tell: the join API then changes nothing.
 */
export function admissionStatusFrom(trust: ClusterTrust, fallback?: { maxAgeSeconds: number }): MembershipOptions["admissionStatus"] {
  return async (token, jti) => {
    try {
      return await trust.introspect(token);
    } catch {
      if (!fallback) return null;
    }
    const listed = await revocationListStatus(trust, jti, fallback.maxAgeSeconds, Date.now());
    return !listed.ok ? null : listed.active ? { active: true } : { active: false, reason: listed.reason };
  };
}

export async function startJoinApi(options: JoinApiServerOptions): Promise<JoinApiServer> {
  const log = options.log ?? (() => {});
  // With the CA (--pki-dir) the join API is etcd's root: it signs in with root's password
  // (derived from the CA key) and, unless given a client certificate, presents one of its own
  // without a common name, which etcd's JSON gateway wants once auth is on.
  const ca = options.pkiDir ? await loadCa(options.pkiDir) : null;
  const ownClient = ca && !options.etcdTls?.cert ? await ownClientCertificate(ca.ca) : null;
  const fetchForEtcd = options.etcdTls?.cert || !ownClient ? (options.etcdTls ? tlsFetch(options.etcdTls) : undefined) : ownClient.fetch;
  const gateway = new EtcdGateway(options.etcd, {
    timeoutMs: options.etcdTimeoutMs,
    ...(fetchForEtcd ? { fetch: fetchForEtcd } : {}),
    ...(ca ? { credentials: { user: ROOT_USER, password: etcdRootPassword(ca.keyPem) } } : {}),
  });
  const signer = ca ? CertificateSigner.fromAuthority(ca.ca, { validDays: options.certValidDays, now: options.now }) : undefined;
  const trust = new ClusterTrust({ broker: options.broker, cluster: options.cluster });
  // The first node to join should not wait for the keys; not awaited, so a broker that is down
  // does not delay the start (the first token then fetches them, and reports what fails).
  void trust.warmKeys().then((fetched) =>
    log(fetched ? `fetched cluster ${options.cluster}'s public keys from the broker` : `could not fetch cluster ${options.cluster}'s public keys yet; the first admission token will`),
  );
  const fallback = options.revocationListMaxAgeSeconds ? { maxAgeSeconds: options.revocationListMaxAgeSeconds } : undefined;
  const membership = new Membership({
    gateway,
    log,
    unknownLearnerGraceMs: options.unknownLearnerGraceSeconds !== undefined ? options.unknownLearnerGraceSeconds * 1000 : undefined,
    holdMs: options.holdSeconds !== undefined ? options.holdSeconds * 1000 : undefined,
    admissionStatus: admissionStatusFrom(trust, fallback),
  });
  const ledger = ca ? new CertificateLedger({ gateway, membership, ca: ca.ca, admissionStatus: admissionStatusFrom(trust, fallback), log }) : undefined;
  const app = createJoinApi({
    membership,
    gateway,
    signer,
    ledger,
    log,
    verify: { broker: options.broker, cluster: options.cluster, trust, clockToleranceSeconds: options.clockToleranceSeconds, revocationListFallback: fallback, now: options.now },
  });

  let refresher: ReturnType<typeof setInterval> | null = null;
  if (fallback) {
    const refresh = () => trust.refreshRevocations().catch((e: unknown) => log(`revocation list refresh failed: ${e instanceof Error ? e.message : String(e)}`));
    await refresh();
    refresher = setInterval(refresh, Math.max(1, fallback.maxAgeSeconds / 2) * 1000);
    refresher.unref();
  }

  if (ca) {
    void gateway.signIn().then((signed) => {
      if (!signed.ok) log(`cannot sign in to etcd as ${ROOT_USER}: ${signed.error.message}`);
      else if (signed.value) log(`signed in to etcd as ${ROOT_USER}`);
      else log("etcd's auth is off: every certificate of this CA is a full etcd client there, a joiner's too (clusters bootstrapped by this release turn it on; see docs/security.md)");
    });
    ledger!.start();
  }

  const server = await new Promise<ReturnType<typeof serve>>((ok, fail) => {
    const s = serve({ fetch: app.fetch, hostname: options.host, port: options.port }, () => ok(s));
    s.once("error", fail);
  });
  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    membership,
    close: () =>
      new Promise<void>((ok) => {
        if (refresher) clearInterval(refresher);
        ownClient?.stop();
        void ledger?.stop();
        server.close(() => ok());
        // Idle keep-alive connections would hold close() open.
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      }),
  };
}

async function loadCa(dir: string): Promise<{ ca: CertificateAuthority; keyPem: string }> {
  const files = pkiFiles(dir);
  const keyPem = readFileSync(files.caKey, "utf8");
  return { ca: await loadCertificateAuthority(readFileSync(files.ca, "utf8"), keyPem), keyPem };
}

/** A client certificate without a common name, made in memory and renewed a day before it ends. */
async function ownClientCertificate(ca: CertificateAuthority): Promise<{ fetch: typeof fetch; stop(): void }> {
  let current = await anonymousClientCertificate(ca, "join API");
  const renew = setInterval(() => {
    if (current.notAfter - Date.now() > 86_400_000) return;
    void anonymousClientCertificate(ca, "join API").then((c) => (current = c));
  }, 3_600_000);
  renew.unref();
  return { fetch: tlsFetchFromMemory(() => ({ ca: ca.certPem, cert: current.cert, key: current.key })), stop: () => clearInterval(renew) };
}
