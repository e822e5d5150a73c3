/**
 * `join-broker controller --etcd URL[,URL…] --broker URL --cluster NAME --listen HOST:PORT`: the
 * reference join API. It prints `join API listening on http://HOST:PORT` once it accepts
 * requests (so `--listen 127.0.0.1:0` can be used and the port read back), logs one line per
 * decision to stderr, and stops cleanly on SIGINT or SIGTERM.
 * @module
 */
import { defineCommand, parseCommand, parseListen, type FlagSpec } from "./flags.ts";
import { isClusterName } from "../../shared/protocol/identifiers.ts";
import { parseEndpoints } from "../etcd/gateway.ts";
import { startJoinApi } from "../join-api/server.ts";
import { EXIT, UsageError } from "../exit-codes.ts";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { tlsFilesFromFlags } from "../etcd/tls-fetch.ts";
import { PkiError } from "../pki/ca.ts";
import { readCertificateAuthority } from "../pki/pki-dir.ts";

export const CONTROLLER_USAGE = `Usage: join-broker controller --etcd URL[,URL…] --broker URL --cluster NAME --listen HOST:PORT
         [--pki-dir DIR --etcd-cacert FILE --etcd-cert FILE --etcd-key FILE]

The reference controllers' join API. It verifies a node's admission token (signature with the
cluster's JWKS, typ, iss, aud, exp, sub = node, peer_url = peerAddress) and asks the broker
whether it is still active before it touches etcd; then it adds the node as an etcd learner
and promotes it once it has started and caught up.

  POST /v1beta1/etcd/members          {"node","peerAddress"[,"csrs"]}  → 200 {"memberID","learner":true,"initialCluster":[…],"started":false[,"certificates"]}
  POST /v1beta1/etcd/members/promote  {"node"}                → 200 {"memberID","learner":false}
  GET  /healthz                                               → 200 when etcd has a leader

Flags:
  --etcd URL[,URL…]             etcd client URLs (v3 JSON gateway); tried in turn on failure
  --broker URL                  the broker's base URL (its origin is the tokens' issuer)
  --cluster NAME                the cluster whose admission tokens are accepted
  --listen HOST:PORT            where to serve (port 0 picks a free one; default 127.0.0.1:9443)
  --clock-tolerance SECONDS     clock skew allowed on exp/nbf (default 30)
  --revocation-list-max-age SECONDS
                                opt-in: when the broker cannot be reached, accept tokens that are
                                not on a revocation list fetched at most SECONDS ago (refreshed
                                every SECONDS/2). Off by default: no broker, no admission.
  --unknown-learner-grace SECONDS
                                remove a learner (started or not) that this process did not add,
                                or that stays a learner after its node completed, once it has
                                blocked joins this long (default 300)
  --hold SECONDS                while etcd says "in a moment" (settling after a change, learner
                                starting or catching up), hold an add or promote and retry it
                                every 50 ms for up to SECONDS before answering 503 + Retry-After
                                (default 10; 0 answers at once)
  --etcd-timeout SECONDS        per etcd request and endpoint (default 10)
  --pki-dir DIR                 the cluster's etcd CA as DIR/ca.crt and DIR/ca.key (PEM): a joining
                                node's certificate requests (sent with its add) are signed for exactly
                                its admitted identity (CN = node, peer SAN = the admitted peer host,
                                server SAN = that host and loopback); the answer carries the
                                certificates and the CA certificate, never a key. The CA as kubeadm,
                                k0s, openssl or Go tools wrote it: an RSA 2048–4096, ECDSA P-256/P-384
                                or Ed25519 key, PKCS#1, SEC1 or PKCS#8 (kubeadm: /etc/kubernetes/pki/etcd,
                                k0s: /var/lib/k0s/pki/etcd)
                                With it the join API is etcd's root (its password is derived from
                                the CA key), keeps the cluster's certificate revocation list
                                (GET /v1beta1/etcd/crl) and talks to etcd with a client certificate
                                of its own (--etcd-cert is used until etcd's auth refuses it)
  --enable-etcd-auth            with --pki-dir: turn etcd's auth on at start if it is off (a cluster
                                bootstrapped by an earlier release): root, kube-apiserver, and no
                                right for node certificates. Give the API servers a kube-apiserver
                                certificate first (join-broker etcd-cert --user kube-apiserver)
  --cert-days DAYS              how long a signed certificate lasts (default 365)
  --etcd-cacert FILE            CA bundle for https etcd endpoints
  --etcd-cert FILE              this join API's client certificate for etcd (with --etcd-key)
  --etcd-key FILE               its key
  --log-format text|json        stderr log lines as text (default) or one JSON object per line:
                                {"time","cluster","msg"}
  --ca-file FILE                PEM file of CA certificates to trust for HTTPS to the broker
                                (a private CA), besides the system's; NODE_EXTRA_CA_CERTS works too
  -h, --help                    this text

Exit codes: 0 stopped by a signal, 1 could not start (port taken, …), 2 bad usage (also a
--pki-dir CA that cannot sign what etcd accepts: the message names the file and the reason).
`;

export const CONTROLLER_FLAGS = {
  etcd: "URLS",
  broker: "URL",
  cluster: "NAME",
  listen: "HOST:PORT",
  "clock-tolerance": "SECONDS",
  "revocation-list-max-age": "SECONDS",
  "unknown-learner-grace": "SECONDS",
  hold: "SECONDS",
  "etcd-timeout": "SECONDS",
  "pki-dir": "DIR",
  "cert-days": "DAYS",
  "enable-etcd-auth": true,
  "etcd-cacert": "FILE",
  "etcd-cert": "FILE",
  "etcd-key": "FILE",
  "log-format": "FORMAT",
} as const satisfies Record<string, FlagSpec>;

function seconds(name: string, value: string | undefined, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || n > max) throw new UsageError(`--${name} must be a number of seconds from ${min} to ${max}, got '${value}'`);
  return n;
}

export async function run(argv: string[]): Promise<number> {
  const { values, help } = parseCommand(defineCommand("controller", CONTROLLER_FLAGS), argv);
  if (help) {
    process.stdout.write(CONTROLLER_USAGE);
    return EXIT.ok;
  }
  const need = (name: "etcd" | "broker" | "cluster") => {
    const v = values[name];
    if (typeof v !== "string" || v === "") throw new UsageError(`--${name} is required`);
    return v;
  };
  const etcdFlag = need("etcd");
  let etcd: string[];
  try {
    etcd = parseEndpoints(etcdFlag);
  } catch (e) {
    throw new UsageError(`--etcd: ${e instanceof Error ? e.message : String(e)}`);
  }
  const broker = need("broker");
  try {
    const url = new URL(broker);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("not http(s)");
  } catch {
    throw new UsageError(`--broker must be an http(s) URL, got '${broker}'`);
  }
  const cluster = need("cluster");
  if (!isClusterName(cluster)) throw new UsageError(`--cluster '${cluster}' is not a cluster name (a DNS label)`);
  const { host, port } = parseListen(typeof values.listen === "string" ? values.listen : "127.0.0.1:9443");
  const clockToleranceSeconds = seconds("clock-tolerance", values["clock-tolerance"] as string | undefined, 0, 600);
  const revocationListMaxAgeSeconds = seconds("revocation-list-max-age", values["revocation-list-max-age"] as string | undefined, 1, 86_400);
  const unknownLearnerGraceSeconds = seconds("unknown-learner-grace", values["unknown-learner-grace"] as string | undefined, 0, 86_400);
  const holdSeconds = seconds("hold", values.hold as string | undefined, 0, 25);
  const etcdTimeout = seconds("etcd-timeout", values["etcd-timeout"] as string | undefined, 1, 300);
  const certValidDays = seconds("cert-days", values["cert-days"] as string | undefined, 1, 3650);
  const pkiDir = values["pki-dir"] as string | undefined;
  if (pkiDir !== undefined) {
    for (const file of ["ca.crt", "ca.key"]) if (!existsSync(join(pkiDir, file))) throw new UsageError(`--pki-dir ${pkiDir} has no ${file}: it holds the cluster's etcd CA as ca.crt and ca.key (PEM)`);
    // A CA that cannot sign what etcd accepts is refused now, naming the file and the reason.
    try {
      await readCertificateAuthority(pkiDir);
    } catch (e) {
      throw e instanceof PkiError ? new UsageError(`--pki-dir: ${e.message}`) : e;
    }
  }
  const etcdTls = tlsFilesFromFlags((name) => values[name] as string | undefined, { mustExist: true }) ?? undefined;
  if (values["enable-etcd-auth"] === true && pkiDir === undefined) throw new UsageError("--enable-etcd-auth goes with --pki-dir: root's password is derived from the CA key");

  const format = values["log-format"] ?? "text";
  if (format !== "text" && format !== "json") throw new UsageError(`--log-format must be text or json, got '${format}'`);
  const log =
    format === "json"
      ? (line: string) => process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), cluster, msg: line })}\n`)
      : (line: string) => process.stderr.write(`${new Date().toISOString()} ${line}\n`);
  const server = await startJoinApi({
    etcd,
    broker,
    cluster,
    host,
    port,
    clockToleranceSeconds,
    revocationListMaxAgeSeconds,
    unknownLearnerGraceSeconds,
    holdSeconds,
    etcdTimeoutMs: etcdTimeout !== undefined ? etcdTimeout * 1000 : undefined,
    pkiDir,
    certValidDays,
    etcdTls,
    enableEtcdAuth: values["enable-etcd-auth"] === true,
    log,
  });
  process.stdout.write(`join API listening on ${server.url}\n`);
  log(`cluster ${cluster}, broker ${broker}, etcd ${etcd.join(",")}${revocationListMaxAgeSeconds ? `, revocation-list fallback ${revocationListMaxAgeSeconds} s` : ""}`);

  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once("SIGINT", () => resolve("SIGINT"));
    process.once("SIGTERM", () => resolve("SIGTERM"));
  });
  log(`${signal}: shutting down`);
  await server.close();
  return EXIT.ok;
}
