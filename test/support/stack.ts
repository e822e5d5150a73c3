/**
 * The one way tests, the lab and the benchmarks start the stack: the broker (`wrangler dev` or
 * `join-broker serve`, test/support/broker.ts), the typed client that talks to it, the join API
 * (`join-broker controller`), the PKI an operator brings (an etcd CA in every node's --pki-dir,
 * a client certificate for the caller) and the agent's `join-broker join` command line. The
 * whole-cluster runner (test/support/cluster.ts) is these pieces put together.
 * @module
 */
import type { ChildProcess } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { TlsFiles } from "../../src/node/etcd/tls-fetch.ts";
import { ROOT_USER, anonymousClientCertificate, etcdRootPassword } from "../../src/node/pki/etcd-identities.ts";
import { certificateAuthority, pkiFiles } from "../../src/node/pki/pki-dir.ts";
import { BrokerClient, type AdmittedTicket, type TicketView } from "../../src/shared/client/index.ts";
import type { Lab } from "../lab/lab.ts";
import { ROOT } from "./broker.ts";
import { goVerify } from "./certcheck.ts";
import { spawnUntilReady } from "./ready-process.ts";

export { ADMIN_TOKEN, ROOT, defaultRuntime, startBroker, type BrokerProcess, type BrokerRuntime, type StartBrokerOptions } from "./broker.ts";

/** bin/join-broker, the command every process of the stack runs. */
export const BIN = join(ROOT, "bin/join-broker");

// --- the typed client ------------------------------------------------------------------------------

/**
 * The typed broker client (src/shared/client) for a broker of the stack: where this process
 * reaches it (`localUrl`, a forward when it runs on a lab host), as its admin unless `bearer` is
 * given (an enrollment token, an admission, a read-only credential). `fetch` is injected as the
 * client allows (the benchmarks pass a keep-alive one).
 */
export function brokerClient(
  broker: { url: string; localUrl?: string; adminToken?: string },
  options: { bearer?: string; fetch?: typeof fetch; timeoutMs?: number } = {},
): BrokerClient {
  return new BrokerClient({
    baseUrl: broker.localUrl ?? broker.url,
    bearer: options.bearer ?? broker.adminToken,
    timeoutMs: options.timeoutMs ?? 60_000,
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
}

/** The view of a ticket that must hold a slot, with its admission; any other state is an error that shows the view. */
export function admitted(view: TicketView): AdmittedTicket {
  if (view.state !== "admitted") throw new Error(`expected an admitted ticket, got ${JSON.stringify(view)}`);
  return view;
}

/** A cluster's enrollment token (and its policy, when given): the first thing every run of the stack asks the broker for. */
export async function enrollCluster(
  broker: { url: string; localUrl?: string; adminToken: string },
  cluster: string,
  options: { description?: string; policy?: Record<string, number>; fetch?: typeof fetch } = {},
): Promise<string> {
  const admin = brokerClient(broker, { fetch: options.fetch }).admin(cluster);
  const created = await admin.createEnrollmentToken({ description: options.description ?? `${cluster} nodes` });
  if (options.policy) await admin.setPolicy(options.policy);
  return created.body.token;
}

// --- the agent's command line ---------------------------------------------------------------------

/** What `joinArgv` writes as flags; only the identity and the state directory are always there. */
export interface JoinArgs {
  broker: string;
  cluster: string;
  token: string;
  node: string;
  peerURL: string;
  stateDir: string;
  /** The join API (own-etcd mode). */
  joinApi?: string;
  /** Own-etcd mode: the etcd binary the agent runs, its data directory and client URL. */
  etcdBin?: string;
  dataDir?: string;
  clientURL?: string;
  /** The operator's etcd CA (and the node's own certificates) on TLS runs. */
  pkiDir?: string;
  /** Gate mode: every node's etcd, with the client certificate to ask it with. */
  etcd?: string[];
  etcdClient?: TlsFiles;
  /** Gate mode: the installer command. */
  exec?: string;
  /** A private CA for the broker's and the join API's HTTPS. */
  caFile?: string;
  /** Default: the agent's own (text). */
  logFormat?: "json" | "text";
  /** --timeout in seconds; default: the agent's own. */
  timeoutSeconds?: number;
  /** More flags, last. */
  extra?: string[];
}

/** `join-broker join …` (without the program): the one place a test, the lab or a benchmark writes an agent's flags. */
export function joinArgv(a: JoinArgs): string[] {
  const flag = (name: string, value: string | number | undefined) => (value === undefined ? [] : [name, String(value)]);
  return [
    "join",
    ...flag("--broker", a.broker),
    ...flag("--cluster", a.cluster),
    ...flag("--token", a.token),
    ...flag("--node", a.node),
    ...flag("--peer-url", a.peerURL),
    ...flag("--join-api", a.joinApi),
    ...flag("--state-dir", a.stateDir),
    ...flag("--etcd-bin", a.etcdBin),
    ...flag("--data-dir", a.dataDir),
    ...flag("--client-url", a.clientURL),
    ...flag("--etcd", a.etcd?.join(",")),
    ...flag("--pki-dir", a.pkiDir),
    ...(a.etcdClient ? ["--etcd-cacert", a.etcdClient.ca!, "--etcd-cert", a.etcdClient.cert!, "--etcd-key", a.etcdClient.key!] : []),
    ...flag("--exec", a.exec),
    ...flag("--ca-file", a.caFile),
    ...flag("--log-format", a.logFormat),
    ...flag("--timeout", a.timeoutSeconds),
    ...(a.extra ?? []),
  ];
}

// --- the join API -----------------------------------------------------------------------------------

export interface JoinApiProcess {
  url: string;
  proc: ChildProcess;
  /** What it printed on stdout and stderr. */
  output(): string;
}

export interface JoinApiOptions {
  broker: string;
  cluster: string;
  /** Every node's etcd client URL. */
  etcd: string[];
  /** More flags (TLS: `preparePki`'s `joinApiArgs`; --ca-file, --hold, --log-format, …). */
  args?: string[];
  /** On this lab's host `join-api`, port 8080 of its address, on the host's clock. */
  lab?: Lab;
}

/** `join-broker controller` as a process of its own group; resolves once it says where it listens. */
export async function startJoinApiProcess(options: JoinApiOptions): Promise<JoinApiProcess> {
  const { lab } = options;
  const listen = lab ? `${lab.host("join-api").ip}:8080` : "127.0.0.1:0";
  const started = await spawnUntilReady(
    process.execPath,
    [
      BIN,
      "controller",
      "--etcd",
      options.etcd.join(","),
      "--broker",
      options.broker,
      "--cluster",
      options.cluster,
      "--listen",
      listen,
      ...(options.args ?? []),
    ],
    {
      what: "the join API",
      ready: /join API listening on (http:\/\/\S+)/,
      spawner: lab ? (command, args, spawnOptions) => lab.spawn("join-api", command, args, spawnOptions) : undefined,
      cwd: ROOT,
      detached: true,
      env: { ...process.env, ...(lab ? lab.clockEnv("join-api") : {}) },
    },
  );
  return { url: started.match[1]!, proc: started.proc, output: started.output };
}

// --- the PKI ----------------------------------------------------------------------------------------

export interface StackPki {
  /** The operator's etcd CA: ca.crt and ca.key, the join API's --pki-dir. */
  caDir: string;
  /** The join API's flags: its --pki-dir, and its etcd client certificate when one was given. */
  joinApiArgs: string[];
  /** This process's own etcd client certificate (no common name: it signs in as root). */
  client: TlsFiles;
  /** etcd's root password, derived from the CA key as the join API derives it. */
  rootPassword(): string;
  rootUser: string;
}

export interface PkiOptions {
  /** Where the CA (unless `operatorCa`) and the caller's client certificate go. */
  dir: string;
  /** Every node's --pki-dir, which gets copies of ca.crt and ca.key (whichever node bootstraps signs its own with them). */
  nodePkiDirs: string[];
  /** The operator's CA as a tool made it (`dir` holds ca.crt and ca.key), instead of one made here. */
  operatorCa?: { dir: string; joinApiClient?: TlsFiles; refused?: boolean };
  /** The common name of a CA made here. */
  commonName?: string;
  /** Judge the caller's certificate with Go's crypto/x509 first, as etcd will (default: under vitest, unless `refused`). */
  goVerify?: boolean;
}

/**
 * An operator's etcd CA (made here, or `operatorCa`'s) in every node's --pki-dir and the join
 * API's, and a client certificate without a common name for the caller, which signs in as root
 * (as the join API does) once the bootstrap node has turned etcd's auth on.
 */
export async function preparePki(options: PkiOptions): Promise<StackPki> {
  const { dir, operatorCa } = options;
  const caDir = operatorCa?.dir ?? join(dir, "pki-ca");
  const { ca } = await certificateAuthority(caDir, operatorCa ? {} : { create: { commonName: options.commonName ?? "e2e etcd CA" } });
  const files = pkiFiles(caDir);
  for (const pkiDir of options.nodePkiDirs) {
    mkdirSync(pkiDir, { recursive: true, mode: 0o700 });
    copyFileSync(files.ca, join(pkiDir, "ca.crt"));
    copyFileSync(files.caKey, join(pkiDir, "ca.key"));
  }
  const clientDir = join(dir, "pki-e2e-harness");
  mkdirSync(clientDir, { recursive: true, mode: 0o700 });
  const own = await anonymousClientCertificate(ca, "e2e-harness", Date.now());
  const client = { ca: join(clientDir, "ca.crt"), cert: join(clientDir, "client.crt"), key: join(clientDir, "client.key") };
  writeFileSync(client.ca, ca.certPem);
  writeFileSync(client.cert, own.cert);
  writeFileSync(client.key, own.key, { mode: 0o600 });
  // What was signed here is judged as etcd will judge it (Go's crypto/x509) before etcd does (the
  // demo and the benchmarks, which start the stack this way too, need no Go).
  if (options.goVerify ?? (!!process.env.VITEST && !operatorCa?.refused)) {
    const verdict = goVerify(files.ca, [client.cert], { usage: "client" });
    if (!verdict.ok) throw new Error(`Go's crypto/x509 refuses the certificates signed with ${files.ca}: ${verdict.output}`);
  }
  const joinApi = operatorCa?.joinApiClient;
  let password: string | null = null;
  return {
    caDir,
    joinApiArgs: ["--pki-dir", caDir, ...(joinApi ? ["--etcd-cacert", joinApi.ca!, "--etcd-cert", joinApi.cert!, "--etcd-key", joinApi.key!] : [])],
    client,
    rootUser: ROOT_USER,
    rootPassword: () => (password ??= etcdRootPassword(readFileSync(files.caKey, "utf8"))),
  };
}
