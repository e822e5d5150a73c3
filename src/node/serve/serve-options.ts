/**
 * `join-broker serve`'s flags: parsed and checked before anything starts.
 * @module
 */
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { parseFlags, parseListen } from "../cli/flags.ts";
import { BEARER_TOKEN_CHARACTERS, isBearerToken } from "../../shared/protocol/bearer.ts";
import { UsageError } from "../exit-codes.ts";

export const SERVE_HELP = `Usage: join-broker serve --listen HOST:PORT --data-dir DIR [flags]
       join-broker serve restore --data-dir DIR [--from BACKUP]   (see serve restore --help)

Runs the broker (the same Worker and JoinQueue Durable Objects as on Cloudflare) on workerd, the
open-source Workers runtime from the 'workerd' npm package, with its state in SQLite files under
DIR. No Cloudflare account and no network access are needed. workerd is restarted if it dies;
SIGTERM or SIGINT stops it cleanly. Prints 'listening on <url>' once the broker answers.

Flags:
  --listen HOST:PORT        address to listen on, e.g. 127.0.0.1:8443, 0.0.0.0:443, [::1]:8443
                            (port 0: any free port). Without TLS only a loopback address is
                            accepted, unless --insecure-http.
  --data-dir DIR            where the state lives (created if missing; default $STATE_DIRECTORY,
                            which systemd sets from StateDirectory=). Back up DIR while serve is
                            stopped; see docs/self-hosting.md.
  --tls-cert FILE           PEM certificate chain (leaf first): serve HTTPS from workerd
  --tls-key FILE            PEM private key of --tls-cert
  --insecure-http           allow plain HTTP on a non-loopback address (tokens travel in clear:
                            only behind a TLS-terminating proxy on a trusted network)
  --admin-token-file FILE   file holding the admin API's bearer token (ADMIN_TOKEN). Otherwise
                            it is read from JOIN_BROKER_ADMIN_TOKEN; never from the command line.
                            At least 16 characters of A-Z a-z 0-9 - . _ ~ + / (= only at the
                            end), as an HTTP bearer token allows. With neither, serve makes a random one on
                            the first start and keeps it in DIR/admin-token (mode 0600).
  --issuer URL              the 'iss' of admission tokens (the broker's public origin). Default:
                            the origin of the admin request that created each cluster.
  --log-level LEVEL         which state changes are logged as JSON lines on stdout: debug, info
                            (default: all but the routine ticket.created and lease.extended),
                            warn (none; errors always are). The audit log keeps every one.
  --client-ip-header NAME   header through which a reverse proxy in front passes the client's
                            address (X-Real-IP, X-Forwarded-For: the last entry is used), for
                            the per-address limit on failed authentications (20 a minute, then
                            429). Without it all clients share one limit, since any address
                            header could be forged: 20 failures from anyone, and every client
                            is answered 429 for the next 60 s.
  -h, --help                this help

Environment:
  JOIN_BROKER_ADMIN_TOKEN   the admin token, when --admin-token-file is not given (else DIR/admin-token)
  JOIN_BROKER_WORKERD       another workerd binary than the npm package's

Exit codes: 0 stopped by a signal, 1 could not start (or workerd kept failing), 2 bad usage.
`;

export interface ServeOptions {
  host: string;
  port: number;
  dataDir: string;
  tls?: { cert: string; key: string };
  /** Absent: serve uses DIR/admin-token, made with a random token on the first start. */
  adminToken?: string;
  issuer?: string;
  logLevel?: string;
  clientIpHeader?: string;
}

const LOG_LEVELS = ["debug", "info", "warn"];

export function isLoopback(host: string): boolean {
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  if (isIP(host) === 6) return host === "::1" || host === "0:0:0:0:0:0:0:1";
  return false;
}

export function parseServeArgs(argv: string[], env: NodeJS.ProcessEnv): { help: true } | { help: false; options: ServeOptions } {
  const { values } = parseFlags(argv, {
    listen: { type: "string" },
    "data-dir": { type: "string" },
    "tls-cert": { type: "string" },
    "tls-key": { type: "string" },
    "insecure-http": { type: "boolean" },
    "admin-token-file": { type: "string" },
    "admin-token": { type: "string" },
    issuer: { type: "string" },
    "log-level": { type: "string" },
    "client-ip-header": { type: "string" },
    help: { type: "boolean", short: "h" },
  } as const);
  if (values.help) return { help: true };
  if (values["admin-token"] !== undefined) {
    throw new UsageError("--admin-token is not accepted by serve (a command line is visible to every user): use --admin-token-file FILE or JOIN_BROKER_ADMIN_TOKEN");
  }
  if (typeof values.listen !== "string") throw new UsageError("--listen HOST:PORT is required");
  const { host, port } = parseListen(values.listen);
  const dataDir = (values["data-dir"] as string | undefined) ?? env.STATE_DIRECTORY?.split(":")[0];
  if (!dataDir) throw new UsageError("--data-dir DIR is required");

  const cert = values["tls-cert"] as string | undefined;
  const key = values["tls-key"] as string | undefined;
  if ((cert === undefined) !== (key === undefined)) throw new UsageError("--tls-cert and --tls-key go together");
  if (cert && key) {
    for (const [flag, file] of [["--tls-cert", cert], ["--tls-key", key]]) {
      let pem: string;
      try {
        pem = readFileSync(file, "utf8");
      } catch (e) {
        throw new UsageError(`cannot read ${flag} ${file}: ${(e as Error).message}`);
      }
      const want = flag === "--tls-cert" ? /-----BEGIN CERTIFICATE-----/ : /-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----/;
      if (!want.test(pem)) throw new UsageError(`${flag} ${file} is not a PEM ${flag === "--tls-cert" ? "certificate" : "private key"}`);
    }
  } else if (!isLoopback(host) && !values["insecure-http"]) {
    throw new UsageError(`refusing plain HTTP on ${host}, which is not a loopback address: give --tls-cert and --tls-key, or --insecure-http if a TLS proxy in front of it is the only client`);
  }

  let adminToken: string | undefined;
  const tokenFile = values["admin-token-file"] as string | undefined;
  if (tokenFile !== undefined) {
    try {
      adminToken = readFileSync(tokenFile, "utf8").trim();
    } catch (e) {
      throw new UsageError(`cannot read --admin-token-file ${tokenFile}: ${(e as Error).message}`);
    }
  } else {
    // Set but empty is not set: DIR/admin-token then applies, as documented.
    adminToken = env.JOIN_BROKER_ADMIN_TOKEN?.trim() || undefined;
  }
  if (tokenFile !== undefined && !adminToken) throw new UsageError(`--admin-token-file ${tokenFile} is empty`);
  if (adminToken !== undefined && adminToken.length < 16) throw new UsageError("the admin token must be at least 16 characters long");
  if (adminToken && !isBearerToken(adminToken)) throw new UsageError(`the admin token may use only ${BEARER_TOKEN_CHARACTERS}: requests carry it as an HTTP bearer token`);

  const issuer = values.issuer as string | undefined;
  if (issuer !== undefined) {
    let url: URL;
    try {
      url = new URL(issuer);
    } catch {
      throw new UsageError(`--issuer ${JSON.stringify(issuer)} is not a URL`);
    }
    if (url.origin !== issuer.replace(/\/$/, "")) throw new UsageError(`--issuer must be an origin like https://broker.example.com, not ${JSON.stringify(issuer)}`);
  }
  const logLevel = values["log-level"] as string | undefined;
  if (logLevel !== undefined && !LOG_LEVELS.includes(logLevel)) throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(", ")}`);

  const clientIpHeader = values["client-ip-header"] as string | undefined;
  if (clientIpHeader !== undefined && !/^[A-Za-z0-9-]+$/.test(clientIpHeader)) throw new UsageError(`--client-ip-header ${JSON.stringify(clientIpHeader)} is not a header name`);

  return { help: false, options: { host, port, dataDir, tls: cert && key ? { cert, key } : undefined, adminToken, issuer: issuer?.replace(/\/$/, ""), logLevel, clientIpHeader } };
}

export const RESTORE_HELP = `Usage: join-broker serve restore --data-dir DIR [--from BACKUP]

Restores a backup of a data directory (BACKUP: a copy of one, taken while serve was stopped, e.g.
an unpacked archive) into DIR, replacing its state; without --from, marks DIR itself as restored
(its files were put back by other means). Run it while serve is stopped.

A backup may be older than a cluster in it: the restored state can say "never bootstrapped" of a
cluster that exists. So at the next start, every such cluster gives no node the bootstrap role
(503 restored_awaiting_admin) until an admin decides: 'join-broker admin adopt' if the cluster
exists, 'join-broker admin bootstrap allow' if it never formed.

Flags:
  --data-dir DIR    the data directory (default $STATE_DIRECTORY)
  --from BACKUP     the copy to restore from
  -h, --help        this help

Exit codes: 0 restored, 1 refused (serve runs on DIR, BACKUP is not a data directory), 2 bad usage.
`;

export function parseRestoreArgs(argv: string[], env: NodeJS.ProcessEnv): { help: true } | { help: false; dataDir: string; from: string | null } {
  const { values } = parseFlags(argv, { "data-dir": { type: "string" }, from: { type: "string" }, help: { type: "boolean", short: "h" } } as const);
  if (values.help) return { help: true };
  const dataDir = (values["data-dir"] as string | undefined) ?? env.STATE_DIRECTORY?.split(":")[0];
  if (!dataDir) throw new UsageError("--data-dir DIR is required");
  return { help: false, dataDir, from: (values.from as string | undefined) ?? null };
}
