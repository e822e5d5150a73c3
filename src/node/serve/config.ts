/**
 * The workerd configuration `join-broker serve` runs: one Worker (the broker bundle), its
 * JoinQueue Durable Object namespace with SQLite storage on local disk (alarms included), and
 * one HTTP or HTTPS socket. The admin token is not written here: workerd reads it from its
 * environment (`fromEnvironment`).
 * @module
 */
import { relative } from "node:path";

/** Keep equal to wrangler.toml's `compatibility_date` (a unit test compares them). */
export const COMPATIBILITY_DATE = "2026-08-01";

/**
 * The Durable Object namespace's storage key: the directory under the disk service that holds
 * one SQLite file per cluster. Part of the data directory's format: never change it.
 */
export const DURABLE_OBJECT_KEY = "etcd-join-broker-JoinQueue";

/** Environment variable through which workerd receives ADMIN_TOKEN. */
export const ADMIN_TOKEN_ENV = "JOIN_BROKER_ADMIN_TOKEN";

export interface WorkerdConfigInput {
  /** Directory the config file is written to; embedded files are named relative to it. */
  configDir: string;
  /** The bundled Worker (absolute path). */
  bundle: string;
  /** Absolute directory of the Durable Objects' SQLite files. */
  storageDir: string;
  /** `host:port` to listen on (port 0: any free port, reported on the control descriptor). */
  address: string;
  tls?: { cert: string; key: string };
  issuer?: string;
  logLevel?: string;
  /** Header a trusted reverse proxy sets to the client's address. */
  clientIpHeader?: string;
  /** The Worker's compatibility date; wrangler.toml's (COMPATIBILITY_DATE) unless a test sets another. */
  compatibilityDate?: string;
  /** The last restore of the data directory (`serve restore`), which every cluster takes note of once. */
  restoreId?: string;
}

/** A Cap'n Proto text literal (its escapes are C's, which JSON's are a subset of for our text). */
const text = (value: string) => JSON.stringify(value);
const embed = (configDir: string, file: string) => `embed ${text(relative(configDir, file))}`;

export function workerdConfig(input: WorkerdConfigInput): string {
  const protocol = input.tls
    ? `https = (options = (), tlsOptions = (keypair = (privateKey = ${embed(input.configDir, input.tls.key)}, certificateChain = ${embed(input.configDir, input.tls.cert)})))`
    : `http = ()`;
  const bindings = [
    `(name = "JOIN_QUEUE", durableObjectNamespace = "JoinQueue")`,
    `(name = "ADMIN_TOKEN", fromEnvironment = ${text(ADMIN_TOKEN_ENV)})`,
    ...(input.issuer ? [`(name = "ISSUER", text = ${text(input.issuer)})`] : []),
    ...(input.logLevel ? [`(name = "LOG_LEVEL", text = ${text(input.logLevel)})`] : []),
    ...(input.clientIpHeader ? [`(name = "CLIENT_IP_HEADER", text = ${text(input.clientIpHeader.toLowerCase())})`] : []),
    ...(input.restoreId ? [`(name = "RESTORE_ID", text = ${text(input.restoreId)})`] : []),
  ];
  return `# Written by join-broker serve at every start; edits are overwritten.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "broker", worker = .broker),
    (name = "durable-objects", disk = (path = ${text(input.storageDir)}, writable = true)),
  ],
  sockets = [
    (name = "http", address = ${text(input.address)}, ${protocol}, service = "broker"),
  ],
);

const broker :Workerd.Worker = (
  modules = [ (name = "worker.js", esModule = ${embed(input.configDir, input.bundle)}) ],
  compatibilityDate = ${text(input.compatibilityDate ?? COMPATIBILITY_DATE)},
  bindings = [
    ${bindings.join(",\n    ")},
  ],
  durableObjectNamespaces = [
    (className = "JoinQueue", uniqueKey = ${text(DURABLE_OBJECT_KEY)}, enableSql = true),
  ],
  durableObjectStorage = (localDisk = "durable-objects"),
);
`;
}
