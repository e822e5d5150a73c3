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
import { TlsHandshakeError, tlsFetch, tlsFetchFromMemory, type TlsFiles } from "../etcd/tls-fetch.ts";
import { memberIdHex } from "../../shared/protocol/member-id.ts";
import { readFileSync } from "node:fs";
import { pkiFiles, readCertificateAuthority } from "../pki/pki-dir.ts";
import type { CertificateAuthority } from "../pki/ca.ts";
import { ROOT_USER, anonymousClientCertificate, etcdRootPassword } from "../pki/etcd-identities.ts";
import { ensureEtcdAuth } from "../etcd/etcd-auth.ts";

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
  /** With `pkiDir`: turn etcd's auth on at start when it is off (etcd-auth.ts). */
  enableEtcdAuth?: boolean;
  /** Sign in to etcd with these instead of root's password derived from the CA key in `pkiDir`. */
  etcdCredentials?: { user: string; password: string };
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
 * The join API's requests to etcd, each certificate refused in a handshake logged once (again
 * after a request got through), in words that name the file (tls-fetch.ts).
 */
function loggingHandshakes(inner: typeof fetch, log: (line: string) => void): typeof fetch {
  const logged = new Set<string>();
  return (async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
    try {
      const res = await inner(input, init);
      logged.clear();
      return res;
    } catch (e) {
      if (e instanceof TlsHandshakeError && !logged.has(e.message)) {
        logged.add(e.message);
        log(`TLS handshake with etcd failed: ${e.message}${e.expiry ? " (a certificate outside its validity period: check the clocks)" : ""}`);
      }
      throw e;
    }
  }) as typeof fetch;
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
  // (derived from the CA key) and presents a client certificate of its own without a common
  // name, which etcd's JSON gateway wants once auth is on; one given with --etcd-cert is used
  // until the gateway refuses it for the user it names.
  const ca = options.pkiDir ? await readCertificateAuthority(options.pkiDir, (options.now ?? Date.now)()) : null;
  const ownClient = ca ? await ownClientCertificate(ca) : null;
  const given = options.etcdTls ? loggingHandshakes(tlsFetch(options.etcdTls), log) : undefined;
  const fetchForEtcd = ownClient
    ? options.etcdTls?.cert && given
      ? untilNamedRefused(given, ownClient.fetch, options.etcdTls.cert, log)
      : ownClient.fetch
    : given;
  const gateway = new EtcdGateway(options.etcd, {
    timeoutMs: options.etcdTimeoutMs,
    ...(fetchForEtcd ? { fetch: fetchForEtcd } : {}),
    ...(options.etcdCredentials
      ? { credentials: options.etcdCredentials }
      : ca && options.pkiDir
        ? { credentials: { user: ROOT_USER, password: etcdRootPassword(readFileSync(pkiFiles(options.pkiDir).caKey, "utf8")) } }
        : {}),
  });
  const signer = ca ? CertificateSigner.fromAuthority(ca, { validDays: options.certValidDays, now: options.now }) : undefined;
  if (signer) log(`signing joiners' etcd certificates with the CA in ${options.pkiDir}: ${signer.describe()}`);
  const trust = new ClusterTrust({ broker: options.broker, cluster: options.cluster });
  // The first node to join should not wait for the keys; not awaited, so a broker that is down
  // does not delay the start (the first token then fetches them, and reports what fails).
  void trust
    .warmKeys()
    .then((fetched) =>
      log(
        fetched
          ? `fetched cluster ${options.cluster}'s public keys from the broker`
          : `could not fetch cluster ${options.cluster}'s public keys yet; the first admission token will`,
      ),
    );
  const fallback = options.revocationListMaxAgeSeconds ? { maxAgeSeconds: options.revocationListMaxAgeSeconds } : undefined;
  const membership = new Membership({
    gateway,
    log,
    unknownLearnerGraceMs: options.unknownLearnerGraceSeconds !== undefined ? options.unknownLearnerGraceSeconds * 1000 : undefined,
    holdMs: options.holdSeconds !== undefined ? options.holdSeconds * 1000 : undefined,
    admissionStatus: admissionStatusFrom(trust, fallback),
  });
  const ledger = ca ? new CertificateLedger({ gateway, membership, ca, admissionStatus: admissionStatusFrom(trust, fallback), log }) : undefined;
  const app = createJoinApi({
    membership,
    gateway,
    signer,
    ledger,
    log,
    verify: {
      broker: options.broker,
      cluster: options.cluster,
      trust,
      clockToleranceSeconds: options.clockToleranceSeconds,
      revocationListFallback: fallback,
      now: options.now,
    },
  });

  // etcd asked once at start: a certificate it refuses (--etcd-cert) or cannot be verified
  // (--etcd-cacert) is in the log now, not first in a joining node's 503.
  void gateway
    .status()
    .then((s) =>
      log(s.ok ? `etcd answers at ${s.endpoint} (cluster ${memberIdHex(s.value.header.clusterId)})` : `etcd does not answer yet: ${s.error.message}`),
    );

  let refresher: ReturnType<typeof setInterval> | null = null;
  if (fallback) {
    const refresh = () =>
      trust.refreshRevocations().catch((e: unknown) => log(`revocation list refresh failed: ${e instanceof Error ? e.message : String(e)}`));
    await refresh();
    refresher = setInterval(refresh, Math.max(1, fallback.maxAgeSeconds / 2) * 1000);
    refresher.unref();
  }

  if (ca && options.pkiDir) {
    const rootPassword = etcdRootPassword(readFileSync(pkiFiles(options.pkiDir).caKey, "utf8"));
    void gateway.signIn().then(async (signed) => {
      if (!signed.ok) return log(`cannot sign in to etcd as ${ROOT_USER}: ${signed.error.message}`);
      if (signed.value) return log(`signed in to etcd as ${ROOT_USER}`);
      if (!options.enableEtcdAuth) {
        return log(
          "etcd's auth is off: every certificate of this CA is a full etcd client there, a joiner's too (clusters bootstrapped by this release turn it on; --enable-etcd-auth turns it on here; see docs/operations.md)",
        );
      }
      const on = await ensureEtcdAuth(gateway, rootPassword);
      log(
        on.ok
          ? "turned etcd's auth on (--enable-etcd-auth): root (this join API) alone changes the membership; kube-apiserver reads and writes every key but /join-broker/; node certificates get nothing but the member list and status"
          : `could not turn etcd's auth on: ${on.error.message}`,
      );
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

/**
 * The client certificate given (--etcd-cert) until etcd's JSON gateway refuses it because it
 * names a user (auth on, which the bootstrap node turned on): then, for good, the join API's
 * own, which names none. Said once.
 */
function untilNamedRefused(given: typeof fetch, own: typeof fetch, certFile: string, log: (line: string) => void): typeof fetch {
  let current = given;
  return (async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
    const res = await current(input, init);
    if (current === own || res.status !== 400 || !(await res.clone().text()).includes("CommonName of client sending a request against gateway")) return res;
    log(
      `etcd's auth is on and its JSON gateway refuses ${certFile}, which names a user (its common name): using a client certificate of this join API's own, without one, made from the CA in --pki-dir`,
    );
    current = own;
    return own(input, init);
  }) as typeof fetch;
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
