/**
 * `join-broker join` flags (PROTOCOL.md, "Command line"), their validation and the help text.
 * @module
 */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { isAbsolute, join, resolve } from "node:path";
import { defineCommand, parseCommand, type FlagSpec, type Values } from "../cli/flags.ts";
import { UsageError } from "../exit-codes.ts";
import { parseEndpoints } from "../etcd/gateway.ts";
import { tlsFilesFromFlags, type TlsFiles } from "../etcd/tls-fetch.ts";
import type { RescueFiles } from "./quorum-rescue.ts";
import { canonicalPeerUrl, isClusterName, isNodeName, peerUrlProblem, reservedNodeNameProblem } from "../../shared/protocol/identifiers.ts";

export type LogFormat = "text" | "json";

export interface AgentOptions {
  brokerUrl: string;
  cluster: string;
  token: string;
  node: string;
  peerURL: string;
  listenPeerURL: string;
  joinApiUrl: string;
  stateDir: string;
  dataDir: string;
  clientURL: string;
  /** Start and supervise etcd; null: another supervisor starts it with the flags the agent gives. */
  etcdBin: string | null;
  etcdArgs: string[];
  printEtcdFlags: boolean;
  /** Ask for a new ticket even though an admin revoked this node's last admission. */
  retryRevoked: boolean;
  /** Overall deadline for joining, in seconds; 0 means none. */
  timeoutSeconds: number;
  /** How long an admitted node tries to reach the join API to be added before it gives its slot back and queues again. */
  joinApiPatienceSeconds: number;
  /** Gate mode: an unmodified installer to run once admitted (`sh -c`); null: the agent joins itself. */
  exec: string | null;
  /** Gate mode: where to ask etcd whether this node is a started voter (default: the client URL). */
  etcdEndpoints: string[];
  /**
   * The other controllers' etcd client URLs (`--etcd`, either mode; empty without it): asked
   * before acting on a bootstrap ticket whether a cluster already exists there.
   */
  controllers: string[];
  /** TLS files for the `--etcd` endpoints (etcdctl's --cacert, --cert, --key). */
  etcdTls: TlsFiles | null;
  /**
   * Its own mode with TLS on every etcd port (`--pki-dir`): the cluster's CA certificate, this
   * node's keys and certificates, and on the node that made or was given it, the CA key. null: plain http.
   */
  pkiDir: string | null;
  /**
   * With --pki-dir: also the client certificate this node's API server reaches etcd with
   * (`apiserver-etcd-client.crt`: etcd user kube-apiserver).
   */
  apiServerClient: boolean;
  /** Gate mode: COMMAND is the node's long-running service; run it again once the node joined. */
  service: boolean;
  /**
   * Gate mode: run with `sh -c` after a failed join attempt, once this node's member is gone from
   * etcd (or given up on): puts the node back where its installer joins from (k0s: its pki/ and
   * etcd/). null: nothing.
   */
  cleanup: string | null;
  /** Gate mode: how long an agent that gives up its turn tries to remove its member before it leaves it to an operator. */
  removalTimeoutSeconds: number;
  /** Gate mode: bring an added, never-started voter's etcd up to restore quorum before removing it (quorum-rescue.ts). */
  rescue: RescueFiles | null;
  logFormat: LogFormat;
  verbose: boolean;
}

export const JOIN_HELP = `Usage: join-broker join --broker URL --cluster NAME --token TOKEN --node NAME --peer-url URL
                        --join-api URL --state-dir DIR [--etcd-bin PATH] [--data-dir DIR] [--client-url URL]
       join-broker join --broker URL --cluster NAME --token TOKEN --node NAME --peer-url URL
                        --state-dir DIR --exec 'COMMAND' --etcd URL[,URL…]      (gate mode)

The node agent. It asks the broker whether this node bootstraps the cluster or joins it, waits
in the cluster's join queue, has the join API add it as an etcd learner, starts etcd, gets it
promoted to a voter, reports completion and writes a marker. Every step is safe to interrupt:
run the same command again and it resumes. It never starts a new cluster unless the broker
handed this node the cluster's one bootstrap ticket.

Required:
  --broker URL          the broker's origin (env JOIN_BROKER_URL)
  --cluster NAME        the cluster to join
  --token TOKEN         enrollment token (or --token-file PATH, or env JOIN_BROKER_TOKEN)
  --peer-url URL        this node's etcd peer URL, e.g. https://10.0.0.4:2380
  --join-api URL        the controllers' join API, e.g. https://10.0.0.2:9443 (not in gate mode)
  --state-dir DIR       where the agent keeps its marker and progress (one per node)

Node and etcd:
  --node NAME           this node's name and etcd member name (default: the host name)
  --etcd-bin PATH       start and supervise etcd; stay in the foreground until stopped
  --data-dir DIR        etcd's data dir (default: <state-dir>/etcd)
  --client-url URL      etcd's client URL, listened on and advertised (default: http://127.0.0.1:2379,
                        https://127.0.0.1:2379 with --pki-dir)
  --pki-dir DIR         etcd with TLS on its client and peer ports and client-certificate auth on
                        both (https:// URLs). This node's keys are made here and never leave it.
                        The bootstrap node uses DIR/ca.crt and DIR/ca.key (PEM, as kubeadm, k0s,
                        openssl or Go tools wrote them: RSA 2048-4096, ECDSA P-256/P-384 or
                        Ed25519; checked at start, exit 3 naming what is wrong) when present,
                        else creates them, and signs its own certificates; a joiner sends
                        certificate requests with its add and the join API signs them for
                        exactly its admission (peer.crt, server.crt, ca.crt land here). The
                        bootstrap node turns etcd's auth on: these certificates get no right but
                        the member list and status; crl.der (kept current) lists revoked ones
  --apiserver-etcd-client
                        with --pki-dir: also get the client certificate this node's kube-apiserver
                        reaches etcd with (DIR/apiserver-etcd-client.crt and .key; etcd user
                        kube-apiserver: read and write every key but /join-broker/)
  --listen-peer-url URL address etcd listens on for peers (default: the peer URL)
  --etcd-arg ARG        one more etcd flag, repeatable; write it inline: --etcd-arg=--heartbeat-interval=100
  --print-etcd-flags    print etcd's flags on stdout, one per line, once they are known. Without
                        --etcd-bin the agent then waits for another supervisor to start etcd with
                        them (they are also written to <state-dir>/etcd-flags.txt).

Gate mode, for an installer that adds its own etcd member (k0s, kubeadm, k3s; docs/installers.md):
  --exec 'COMMAND'      instead of --join-api and --etcd-bin: once admitted, run COMMAND with sh -c
                        and JOIN_BROKER_ROLE (bootstrap|join), JOIN_BROKER_ADMISSION (the JWT),
                        JOIN_BROKER_URL, JOIN_BROKER_CLUSTER, JOIN_BROKER_NODE,
                        JOIN_BROKER_PEER_URL and JOIN_BROKER_TICKET in its environment (its
                        output goes to stderr). The
                        agent heartbeats while it runs, and completes once etcd lists a started
                        voter with this node's peer URL. COMMAND may exit (an installer) or keep
                        running (a supervisor: the agent then stays in the foreground and passes
                        signals on). If it fails before the node is a voter, the agent removes
                        this node's learner (never a voter), leaves the queue and exits 4.
  --etcd URL[,URL…]     etcd client URLs to ask (the cluster's, or this node's; default: --client-url).
                        Also without --exec: the other controllers' client URLs. Either way,
                        before acting on a bootstrap ticket the agent asks them whether a
                        cluster exists there already, and refuses (exit 3) if one answers
  --etcd-cacert FILE    CA bundle for https etcd endpoints
  --etcd-cert FILE      client certificate for etcd (with --etcd-key)
  --etcd-key FILE       client key for etcd. The three are read whenever etcd is asked, so
                        they may be files the installer writes only while it joins.
  --etcd-server-name NAME
                        check etcd's server certificate against NAME instead of each endpoint's
                        host (k0s's and k3s's etcd certificates name only localhost and 127.0.0.1)
  --service             COMMAND is the node's long-running service (k0s controller, k3s server):
                        run it again on every start, also once the node has joined, and stay in
                        the foreground while it runs. Without it, a joined node exits 0 at once.
  --cleanup 'COMMAND'   after a failed join attempt, once this node's member is gone from etcd
                        (or given up on), run COMMAND with sh -c to put the node back where its
                        installer joins from (k0s: rm -rf /var/lib/k0s/pki /var/lib/k0s/etcd).
                        Never after the node was a voter, never for the bootstrap node
  --removal-timeout SECONDS
                        how long an agent that gives up its turn tries to remove this node's
                        non-voting member from etcd (default 120). Past it the agent tells the
                        broker, which pauses the cluster until an operator removes the member
                        (the agent names it and the command) and resumes it; the agent exits 4
  --rescue-etcd PATH [--rescue-pki DIR]
                        when the installer added this node as a voter and failed before its etcd
                        ran (k0s before 1.36), a small cluster has lost its quorum and etcd
                        removes nothing: run PATH as that member (with the peer certificate
                        DIR/peer.crt, DIR/peer.key and DIR/ca.crt for an https peer URL; a data
                        dir of the agent's own) until quorum is back, then remove the member

Behaviour:
  --timeout SECONDS     give up joining after this long (default 3600; 0: never)
  --join-api-patience SECONDS
                        an admitted node that cannot reach the join API to be added for this
                        long gives its slot back and queues again (default 60)
  --retry-revoked       ask for a new place in the queue even though an admin revoked this
                        node's last admission (without it, a revoked node stays refused)
  --log-format FORMAT   text (default) or json: one JSON object per line on stderr
  --verbose             log every retry
  --ca-file FILE        PEM file of CA certificates to trust for HTTPS (a private CA),
                        besides the system's; NODE_EXTRA_CA_CERTS works too
  -h, --help            this help

Output: progress goes to stderr (one updating line on a terminal, log lines otherwise); once the
node is a voter (the bootstrap node: once its etcd is healthy) stdout gets one line:
  joined cluster <etcd cluster ID, hex> as <bootstrap|join>

Exit codes:
  0    joined (with --etcd-bin: etcd stopped cleanly after a signal); or already joined per the marker
  2    bad usage: a missing or malformed flag, or a state dir that belongs to another node
  3    refused: the admission was revoked, a token was rejected, the peer URL is taken, the
       broker says this node already joined but its etcd data is gone (run
       'join-broker admin forget NODE --cluster NAME' after removing the stale etcd member),
       its member is a voter that ran but the data dir is empty, or another etcd than its
       own answers on --client-url
  4    gave up: --timeout passed, or the etcd it supervises keeps failing (the last line
       gives etcd's own error), or (gate mode) COMMAND exited non-zero; it also leaves the
       queue (unless its etcd runs on as a voter), so its slot is free at once
  1    unexpected failure
  130, 143  stopped by SIGINT or SIGTERM before the node joined (run again to resume)
`;

/** The flags (PROTOCOL.md, "Command line"); `--help` and `--ca-file` are answered before these are read. */
export const JOIN_FLAGS = {
  broker: { value: "URL", env: "JOIN_BROKER_URL" },
  cluster: "NAME",
  token: { value: "TOKEN", env: "JOIN_BROKER_TOKEN" },
  "token-file": "PATH",
  node: "NAME",
  "peer-url": "URL",
  "listen-peer-url": "URL",
  "join-api": "URL",
  "state-dir": "DIR",
  "data-dir": "DIR",
  "client-url": "URL",
  "pki-dir": "DIR",
  "apiserver-etcd-client": true,
  "etcd-bin": "PATH",
  "etcd-arg": { value: "ARG", repeat: true },
  "print-etcd-flags": true,
  "retry-revoked": true,
  exec: "COMMAND",
  etcd: "URLS",
  "etcd-cacert": "FILE",
  "etcd-cert": "FILE",
  "etcd-key": "FILE",
  "etcd-server-name": "NAME",
  service: true,
  cleanup: "COMMAND",
  "removal-timeout": "SECONDS",
  "rescue-etcd": "PATH",
  "rescue-pki": "DIR",
  timeout: "SECONDS",
  "join-api-patience": "SECONDS",
  "log-format": "FORMAT",
  verbose: true,
} as const satisfies Record<string, FlagSpec>;

/** Flags the agent sets on etcd itself; `--etcd-arg` must not fight over them. */
const RESERVED_ETCD_FLAGS = [
  "name", "data-dir", "listen-peer-urls", "initial-advertise-peer-urls", "listen-client-urls", "advertise-client-urls",
  "initial-cluster", "initial-cluster-state", "initial-cluster-token",
];
/** Set by the agent with --pki-dir. */
const RESERVED_TLS_FLAGS = [
  "cert-file", "key-file", "trusted-ca-file", "client-cert-auth", "peer-cert-file", "peer-key-file", "peer-trusted-ca-file", "peer-client-cert-auth",
  "client-crl-file", "peer-crl-file",
];

export type ParsedArgs = { help: true } | { help: false; options: AgentOptions };

export function parseJoinArgs(argv: string[], env: Record<string, string | undefined> = process.env): ParsedArgs {
  const { values, fromEnv, help } = parseCommand(defineCommand("join", JOIN_FLAGS), argv, env);
  if (help) return { help: true };
  const str = (name: string): string | undefined => {
    const v = values[name];
    return typeof v === "string" && v.trim() !== "" ? v.trim() : undefined;
  };
  const required = (name: string): string => {
    const v = str(name);
    if (!v) throw new UsageError(`--${name} is required`);
    return v;
  };

  // Every missing flag at once, not one per run.
  const missing = [
    ...(str("broker") ? [] : ["--broker (or JOIN_BROKER_URL)"]),
    ...(str("cluster") ? [] : ["--cluster"]),
    ...(str("token") || str("token-file") ? [] : ["an enrollment token (--token, --token-file or JOIN_BROKER_TOKEN)"]),
    ...(str("peer-url") ? [] : ["--peer-url"]),
    ...(typeof values.exec === "string" || str("join-api") ? [] : ["--join-api"]),
    ...(str("state-dir") ? [] : ["--state-dir"]),
  ];
  if (missing.length > 1) throw new UsageError(`${missing.slice(0, -1).join(", ")} and ${missing.at(-1)} are required`);

  const brokerUrl = httpUrl("--broker", required("broker"));
  const cluster = required("cluster");
  if (!isClusterName(cluster)) throw new UsageError(`--cluster ${JSON.stringify(cluster)} is not a valid cluster name (a DNS label: a-z, 0-9, '-')`);

  // The token's order: the flag, the file, then JOIN_BROKER_TOKEN.
  const token = fromEnv.has("token") ? readToken(undefined, str("token-file"), str("token")) : readToken(str("token"), str("token-file"), undefined);
  const node = str("node") ?? hostname().split(".")[0];
  if (!isNodeName(node)) throw new UsageError(`--node ${JSON.stringify(node)} is not a valid node name (letters, digits, '.', '_', '-'; at most 63)`);
  const reserved = reservedNodeNameProblem(node);
  if (reserved) throw new UsageError(`--node: ${reserved}`);

  const peerURL = peerUrl("--peer-url", required("peer-url"));
  const listenPeerURL = peerUrl("--listen-peer-url", str("listen-peer-url") ?? peerURL);
  const exec = typeof values.exec === "string" ? values.exec : null;
  if (exec !== null && exec.trim() === "") throw new UsageError("--exec needs a command");
  const gate = gateOptions(exec, values, str, peerURL);
  // In gate mode a join API is optional: the installer is told where it is (JOIN_BROKER_JOIN_API).
  const joinApiText = exec === null ? required("join-api") : str("join-api");
  const joinApiUrl = joinApiText === undefined ? "" : httpUrl("--join-api", joinApiText);
  const stateDir = resolve(required("state-dir"));
  const dataDir = resolve(str("data-dir") ?? join(stateDir, "etcd"));
  const pkiDirText = str("pki-dir");
  if (pkiDirText !== undefined && exec !== null) throw new UsageError("--pki-dir does not go with --exec: in gate mode the installer runs etcd with its own certificates (give the agent --etcd-cacert, --etcd-cert and --etcd-key)");
  const pkiDir = pkiDirText === undefined ? null : resolve(pkiDirText);
  const apiServerClient = values["apiserver-etcd-client"] === true;
  if (apiServerClient && !pkiDir) throw new UsageError("--apiserver-etcd-client goes with --pki-dir: the certificate is signed like the node's own, into that directory");
  const clientURL = peerUrl("--client-url", str("client-url") ?? (pkiDir ? "https://127.0.0.1:2379" : "http://127.0.0.1:2379"));
  if (pkiDir) {
    for (const [flag, url] of [["--peer-url", peerURL], ["--listen-peer-url", listenPeerURL], ["--client-url", clientURL]] as const) {
      if (!url.startsWith("https://")) throw new UsageError(`${flag} ${url} must be an https:// URL with --pki-dir (etcd serves TLS on every port)`);
    }
  }

  const etcdBinRaw = str("etcd-bin");
  if (exec !== null) for (const flag of ["etcd-bin", "etcd-arg", "print-etcd-flags"]) if (values[flag] !== undefined) throw new UsageError(`--${flag} does not go with --exec: in gate mode the installer adds the member and runs etcd`);
  const etcdBin = etcdBinRaw ? (isAbsolute(etcdBinRaw) || !etcdBinRaw.includes("/") ? etcdBinRaw : resolve(etcdBinRaw)) : null;
  const etcdArgs = (values["etcd-arg"] as string[] | undefined) ?? [];
  for (const arg of etcdArgs) {
    const name = /^--?([a-z0-9-]+)/.exec(arg)?.[1];
    if (!name) throw new UsageError(`--etcd-arg ${JSON.stringify(arg)} is not an etcd flag (write it inline: --etcd-arg=--flag=value)`);
    if (RESERVED_ETCD_FLAGS.includes(name)) throw new UsageError(`--etcd-arg may not set --${name}: the agent sets it`);
    if (pkiDir && RESERVED_TLS_FLAGS.includes(name)) throw new UsageError(`--etcd-arg may not set --${name} with --pki-dir: the agent sets it from the files in ${pkiDir}`);
  }

  const timeoutText = str("timeout") ?? "3600";
  const timeoutSeconds = Number(timeoutText);
  if (!Number.isFinite(timeoutSeconds) || timeoutSeconds < 0) throw new UsageError(`--timeout ${JSON.stringify(timeoutText)} must be a number of seconds (0: no limit)`);

  const patienceText = str("join-api-patience") ?? "60";
  const joinApiPatienceSeconds = Number(patienceText);
  if (!/^\d+$/.test(patienceText) || joinApiPatienceSeconds < 1) throw new UsageError(`--join-api-patience ${JSON.stringify(patienceText)} must be a whole number of seconds, at least 1`);

  const logFormat = str("log-format") ?? "text";
  if (logFormat !== "text" && logFormat !== "json") throw new UsageError(`--log-format must be text or json, not ${JSON.stringify(logFormat)}`);

  return {
    help: false,
    options: {
      brokerUrl,
      cluster,
      token,
      node,
      peerURL,
      listenPeerURL,
      joinApiUrl,
      stateDir,
      dataDir,
      clientURL,
      etcdBin,
      etcdArgs,
      printEtcdFlags: values["print-etcd-flags"] === true,
      retryRevoked: values["retry-revoked"] === true,
      timeoutSeconds,
      joinApiPatienceSeconds,
      exec,
      etcdEndpoints: gate.endpoints ?? [clientURL],
      controllers: gate.endpoints ?? [],
      etcdTls: gate.tls,
      pkiDir,
      apiServerClient,
      service: values.service === true,
      cleanup: gate.cleanup,
      removalTimeoutSeconds: gate.removalTimeoutSeconds,
      rescue: gate.rescue,
      logFormat,
      verbose: values.verbose === true,
    },
  };
}

/** `--etcd` and its TLS files (either mode), and `--service` (gate mode only). */
function gateOptions(
  exec: string | null,
  values: Values,
  str: (name: string) => string | undefined,
  peerURL: string,
): { endpoints: string[] | null; tls: TlsFiles | null; cleanup: string | null; removalTimeoutSeconds: number; rescue: RescueFiles | null } {
  for (const flag of ["service", "cleanup", "removal-timeout", "rescue-etcd", "rescue-pki"]) {
    if (exec === null && values[flag] !== undefined) throw new UsageError(`--${flag} is for gate mode: give it with --exec 'COMMAND'`);
  }
  const cleanup = typeof values.cleanup === "string" ? values.cleanup : null;
  if (cleanup !== null && cleanup.trim() === "") throw new UsageError("--cleanup needs a command");
  const removalText = str("removal-timeout") ?? "120";
  const removalTimeoutSeconds = Number(removalText);
  if (!/^\d+$/.test(removalText) || removalTimeoutSeconds < 1) throw new UsageError(`--removal-timeout ${JSON.stringify(removalText)} must be a whole number of seconds, at least 1`);
  const rescueEtcd = str("rescue-etcd");
  const rescuePki = str("rescue-pki");
  if (rescuePki && !rescueEtcd) throw new UsageError("--rescue-pki goes with --rescue-etcd PATH");
  if (rescueEtcd && !rescuePki && peerURL.startsWith("https://")) throw new UsageError(`--rescue-etcd with an https peer URL needs --rescue-pki DIR (ca.crt, peer.crt and peer.key of the member, as the installer makes them)`);
  const rescue = rescueEtcd ? { etcdBin: resolve(rescueEtcd), pkiDir: rescuePki ? resolve(rescuePki) : null } : null;
  let endpoints: string[] | null = null;
  const etcd = str("etcd");
  if (etcd) {
    try {
      endpoints = parseEndpoints(etcd);
    } catch (e) {
      throw new UsageError(`--etcd ${JSON.stringify(etcd)}: ${(e as Error).message}`);
    }
  }
  return { endpoints, tls: tlsFilesFromFlags(str, { mustExist: false }), cleanup, removalTimeoutSeconds, rescue };
}

function readToken(flag: string | undefined, file: string | undefined, fromEnv: string | undefined): string {
  if (flag && file) throw new UsageError("give either --token or --token-file, not both");
  let token = flag;
  if (!token && file) {
    try {
      token = readFileSync(file, "utf8").trim();
    } catch (e) {
      throw new UsageError(`cannot read --token-file ${file}: ${(e as Error).message}`);
    }
  }
  token ??= fromEnv?.trim();
  if (!token) throw new UsageError("an enrollment token is required: --token, --token-file or JOIN_BROKER_TOKEN");
  if (!/^[A-Za-z0-9._~+/-]+=*$/.test(token)) throw new UsageError("the enrollment token contains characters a bearer token cannot carry");
  return token;
}

function httpUrl(flag: string, value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`${flag} ${JSON.stringify(value)} is not an absolute URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError(`${flag} must be an http or https URL`);
  return value.replace(/\/+$/, "");
}

function peerUrl(flag: string, value: string): string {
  const why = peerUrlProblem(value);
  if (why) throw new UsageError(`${flag} ${JSON.stringify(value)} ${why}`);
  return canonicalPeerUrl(value);
}
