/**
 * `join-broker controller --etcd URL[,URL…] --broker URL --cluster NAME --listen HOST:PORT`: the
 * reference join API (src/node/join-api/server.ts). It prints `join API listening on
 * http://HOST:PORT` once it accepts requests (so `--listen 127.0.0.1:0` can be used and the port
 * read back), logs one line per decision to stderr, and stops cleanly on SIGINT or SIGTERM.
 * @module
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Option } from "commander";
import { EXIT, UsageError } from "../exit-codes.ts";
import { caFileOption, withCaFile } from "./ca-file.ts";
import { requireAll, unset, type CliCommand } from "./command.ts";
import { addEtcdTlsOptions, etcdTlsFiles, logFormatOption } from "./etcd-options.ts";
import { stopOnSignals } from "./signals.ts";
import { clusterName, endpoints, httpUrl, listen, number, path, value, type Reader } from "./values.ts";

const DESCRIPTION = `The reference controllers' join API. It verifies a node's admission token (signature with the cluster's JWKS, typ, iss, aud, exp, sub = node, peer_url = peerAddress) and asks the broker whether it is still active before it touches etcd; then it adds the node as an etcd learner and promotes it once it has started and caught up.`;

const AFTER = `
Endpoints:
  POST /v1beta1/etcd/members          {"node","peerAddress"[,"csrs"]}
                                      → 200 {"memberID","learner":true,"initialCluster":[…],"started":false[,"certificates"]}
  POST /v1beta1/etcd/members/promote  {"node"}  → 200 {"memberID","learner":false}
  GET  /v1beta1/etcd/crl              → 200 the cluster's certificate revocation list (DER; with --pki-dir)
  GET  /healthz                       → 200 when etcd has a leader

Exit codes: 0 stopped by a signal, 1 could not start (port taken, …), 2 bad usage (also a
--pki-dir CA that cannot sign what etcd accepts: the message names the file and the reason).
`;

/** A directory holding the cluster's etcd CA as ca.crt and ca.key. */
const caDir: Reader<string> = (t, flag) => {
  for (const file of ["ca.crt", "ca.key"])
    if (!existsSync(join(t, file))) throw new UsageError(`${flag} ${t} has no ${file}: it holds the cluster's etcd CA as ca.crt and ca.key (PEM)`);
  return path(t, flag, undefined);
};

const seconds = (min: number, max: number) => number({ min, max, unit: "seconds" });

export function defineController(cmd: CliCommand): CliCommand {
  cmd
    .description(DESCRIPTION)
    .usage("--etcd URL[,URL…] --broker URL --cluster NAME --listen HOST:PORT\n         [--pki-dir DIR --etcd-cacert FILE --etcd-cert FILE --etcd-key FILE]")
    .optionsGroup("Flags:")
    .addOption(value("--etcd <URL[,URL…]>", "etcd client URLs (v3 JSON gateway); tried in turn on failure", endpoints))
    .addOption(value("--broker <URL>", "the broker's base URL (its origin is the tokens' issuer)", httpUrl))
    .addOption(value("--cluster <NAME>", "the cluster whose admission tokens are accepted", clusterName))
    .addOption(value("--listen <HOST:PORT>", "where to serve (port 0 picks a free one)", listen).default({ host: "127.0.0.1", port: 9443 }, "127.0.0.1:9443"))
    .addOption(value("--clock-tolerance <SECONDS>", "clock skew allowed on exp/nbf (default 30)", seconds(0, 600)))
    .addOption(
      value(
        "--revocation-list-max-age <SECONDS>",
        "opt-in: when the broker cannot be reached, accept tokens that are not on a revocation list fetched at most SECONDS ago (refreshed every SECONDS/2). Off by default: no broker, no admission.",
        seconds(1, 86_400),
      ),
    )
    .addOption(
      value(
        "--unknown-learner-grace <SECONDS>",
        "remove a learner (started or not) that this process did not add, or that stays a learner after its node completed, once it has blocked joins this long (default 300)",
        seconds(0, 86_400),
      ),
    )
    .addOption(
      value(
        "--hold <SECONDS>",
        'while etcd says "in a moment" (settling after a change, learner starting or catching up), hold an add or promote and retry it every 50 ms for up to SECONDS before answering 503 + Retry-After (default 10; 0 answers at once)',
        seconds(0, 25),
      ),
    )
    .addOption(value("--etcd-timeout <SECONDS>", "per etcd request and endpoint (default 10)", seconds(1, 300)))
    .addOption(
      value(
        "--pki-dir <DIR>",
        "the cluster's etcd CA as DIR/ca.crt and DIR/ca.key (PEM): a joining node's certificate requests (sent with its add) are signed for exactly its " +
          "admitted identity (CN = node, peer SAN = the admitted peer host, server SAN = that host and loopback); the answer carries the certificates and the CA certificate, never a key. " +
          "The CA as kubeadm, k0s, openssl or Go tools wrote it: an RSA 2048–4096, ECDSA P-256/P-384 or Ed25519 key, PKCS#1, SEC1 or PKCS#8 (kubeadm: /etc/kubernetes/pki/etcd, k0s: /var/lib/k0s/pki/etcd). " +
          "With it the join API is etcd's root (its password is derived from the CA key), keeps the cluster's certificate revocation list (GET /v1beta1/etcd/crl) " +
          "and talks to etcd with a client certificate of its own (--etcd-cert is used until etcd's auth refuses it)",
        caDir,
      ),
    )
    .addOption(
      new Option(
        "--enable-etcd-auth",
        "with --pki-dir: turn etcd's auth on at start if it is off (a cluster bootstrapped by an earlier release): root, kube-apiserver, and no right for node certificates. " +
          "Give the API servers a kube-apiserver certificate first (join-broker etcd-cert --user kube-apiserver)",
      ),
    )
    .addOption(value("--cert-days <DAYS>", "how long a signed certificate lasts (default 365)", number({ min: 1, max: 3650, unit: "days" })));
  addEtcdTlsOptions(cmd, { mustExist: true });
  cmd
    .addOption(logFormatOption('stderr log lines as text, or one JSON object per line: {"time","cluster","msg"}'))
    .addOption(caFileOption())
    .addHelpOption(new Option("-h, --help", "this help"))
    .addHelpText("after", AFTER);
  return cmd.runs((c) => withCaFile(c, () => runController(c)));
}

interface ControllerValues {
  etcd?: string[];
  broker?: string;
  cluster?: string;
  listen: { host: string; port: number };
  clockTolerance?: number;
  revocationListMaxAge?: number;
  unknownLearnerGrace?: number;
  hold?: number;
  etcdTimeout?: number;
  pkiDir?: string;
  certDays?: number;
  enableEtcdAuth?: true;
  logFormat: "text" | "json";
}

async function runController(cmd: CliCommand): Promise<number> {
  requireAll(unset(cmd, "etcd", "broker", "cluster"));
  const v = cmd.opts<ControllerValues>();
  const etcd = v.etcd!;
  const broker = v.broker!;
  const cluster = v.cluster!;
  const etcdTls = etcdTlsFiles(cmd) ?? undefined;
  if (v.enableEtcdAuth && v.pkiDir === undefined) throw new UsageError("--enable-etcd-auth goes with --pki-dir: root's password is derived from the CA key");
  if (v.pkiDir !== undefined) {
    // A CA that cannot sign what etcd accepts is refused now, naming the file and the reason.
    const [{ PkiError }, { readCertificateAuthority }] = await Promise.all([import("../pki/ca.ts"), import("../pki/pki-dir.ts")]);
    try {
      await readCertificateAuthority(v.pkiDir);
    } catch (e) {
      throw e instanceof PkiError ? new UsageError(`--pki-dir: ${e.message}`) : e;
    }
  }
  const log =
    v.logFormat === "json"
      ? (line: string) => process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), cluster, msg: line })}\n`)
      : (line: string) => process.stderr.write(`${new Date().toISOString()} ${line}\n`);
  const { startJoinApi } = await import("../join-api/server.ts");
  const server = await startJoinApi({
    etcd,
    broker,
    cluster,
    host: v.listen.host,
    port: v.listen.port,
    clockToleranceSeconds: v.clockTolerance,
    revocationListMaxAgeSeconds: v.revocationListMaxAge,
    unknownLearnerGraceSeconds: v.unknownLearnerGrace,
    holdSeconds: v.hold,
    etcdTimeoutMs: v.etcdTimeout !== undefined ? v.etcdTimeout * 1000 : undefined,
    pkiDir: v.pkiDir,
    certValidDays: v.certDays,
    etcdTls,
    enableEtcdAuth: v.enableEtcdAuth === true,
    log,
  });
  const stop = stopOnSignals();
  try {
    process.stdout.write(`join API listening on ${server.url}\n`);
    log(
      `cluster ${cluster}, broker ${broker}, etcd ${etcd.join(",")}${v.revocationListMaxAge ? `, revocation-list fallback ${v.revocationListMaxAge} s` : ""}`,
    );
    log(`${await stop.stopped}: shutting down`);
    await server.close();
    return EXIT.ok;
  } finally {
    stop.release();
  }
}
