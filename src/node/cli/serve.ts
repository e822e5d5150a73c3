/**
 * `join-broker serve`: the broker on workerd, self-hosted (docs/self-hosting.md): its flags,
 * checked before anything starts, and `serve restore`.
 * @module
 */
import { Option, type Command } from "commander";
import type { ServeOptions } from "../serve/start.ts";
import type { Supervisor } from "../serve/supervisor.ts";
import { EXIT, UsageError } from "../exit-codes.ts";
import { packageVersion } from "../package-root.ts";
import { parseOnly, requireAll, requirement, together, typed, unset, type CliCommand } from "./command.ts";
import { stopOnSignals } from "./signals.ts";
import { bearerToken, certificateFile, choice, isLoopback, listen, origin, privateKeyFile, readSecret, text, value, type Reader } from "./values.ts";

const DESCRIPTION = `Runs the broker (the same Worker and JoinQueue Durable Objects as on Cloudflare) on workerd, the open-source Workers runtime from the 'workerd' npm package, with its state in SQLite files under DIR. No Cloudflare account and no network access are needed. workerd is restarted if it dies; SIGTERM or SIGINT stops it cleanly. Prints 'listening on <url>' once the broker answers.`;

const AFTER = `
Environment:
  JOIN_BROKER_ADMIN_TOKEN   the admin token, when --admin-token-file is not given (else DIR/admin-token)
  JOIN_BROKER_WORKERD       another workerd binary than the npm package's

Exit codes: 0 stopped by a signal, 1 could not start (or workerd kept failing), 2 bad usage.
`;

const RESTORE_DESCRIPTION = `Restores a backup of a data directory (BACKUP: a copy of one, taken while serve was stopped, e.g. an unpacked archive) into DIR, replacing its state; without --from, marks DIR itself as restored (its files were put back by other means). Run it while serve is stopped.

A backup may be older than a cluster in it: the restored state can say "never bootstrapped" of a cluster that exists. So at the next start, every such cluster gives no node the bootstrap role (503 restored_awaiting_admin) until an admin decides: 'join-broker admin adopt' if the cluster exists, 'join-broker admin bootstrap allow' if it never formed.`;

const headerName: Reader<string> = (t, flag) => {
  if (!/^[A-Za-z0-9-]+$/.test(t)) throw new UsageError(`${flag} ${JSON.stringify(t)} is not a header name`);
  return t;
};

/** `--data-dir DIR`, or systemd's StateDirectory= (several directories: the first one). */
function dataDirOption(description: string): Option {
  return value("--data-dir <DIR>", description, text).env("STATE_DIRECTORY");
}

function dataDir(cmd: Command): string | undefined {
  const dir = cmd.getOptionValue("dataDir") as string | undefined;
  return cmd.getOptionValueSource("dataDir") === "env" ? dir?.split(":")[0] || undefined : dir;
}

export function defineServe(cmd: CliCommand): CliCommand {
  cmd
    .description(DESCRIPTION)
    .usage("--listen HOST:PORT --data-dir DIR [flags]\n       join-broker serve restore --data-dir DIR [--from BACKUP]   (see serve restore --help)")
    .optionsGroup("Flags:")
    .addOption(
      value(
        "--listen <HOST:PORT>",
        "address to listen on, e.g. 127.0.0.1:8443, 0.0.0.0:443, [::1]:8443 (port 0: any free port). Without TLS only a loopback address is accepted, unless --insecure-http.",
        listen,
      ),
    )
    .addOption(
      dataDirOption(
        "where the state lives (created if missing; systemd sets STATE_DIRECTORY from StateDirectory=). Back up DIR while serve is stopped; see docs/self-hosting.md.",
      ),
    )
    .addOption(value("--tls-cert <FILE>", "PEM certificate chain (leaf first): serve HTTPS from workerd", certificateFile))
    .addOption(value("--tls-key <FILE>", "PEM private key of --tls-cert", privateKeyFile))
    .addOption(
      new Option(
        "--insecure-http",
        "allow plain HTTP on a non-loopback address (tokens travel in clear: only behind a TLS-terminating proxy on a trusted network)",
      ),
    )
    .addOption(
      value(
        "--admin-token-file <FILE>",
        "file holding the admin API's bearer token (ADMIN_TOKEN). Otherwise it is read from JOIN_BROKER_ADMIN_TOKEN; never from the command line. " +
          "At least 16 characters of A-Z a-z 0-9 - . _ ~ + / (= only at the end), as an HTTP bearer token allows. With neither, serve makes a random one on " +
          "the first start and keeps it in DIR/admin-token (mode 0600).",
        text,
      ),
    )
    // Known only to be refused with the reason (a command line is visible to every user); its environment variable is the way.
    .addOption(value("--admin-token <TOKEN>", "", text).env("JOIN_BROKER_ADMIN_TOKEN").hideHelp())
    .addOption(
      value(
        "--issuer <URL>",
        "the 'iss' of admission tokens (the broker's public origin). Default: the origin of the admin request that created each cluster.",
        origin,
      ),
    )
    .addOption(
      choice(
        "--log-level <LEVEL>",
        "which state changes are logged as JSON lines on stdout: debug, info (default: all but the routine ticket.created and lease.extended), warn (none; errors always are). The audit log keeps every one.",
        ["debug", "info", "warn"],
      ),
    )
    .addOption(
      value(
        "--client-ip-header <NAME>",
        "header through which a reverse proxy in front passes the client's address (X-Real-IP, X-Forwarded-For: the last entry is used), for the " +
          "per-address limit on failed authentications (20 a minute, then 429). Without it all clients share one limit, since any address header " +
          "could be forged: 20 failures from anyone, and every client is answered 429 for the next 60 s.",
        headerName,
      ),
    )
    .addHelpOption(new Option("-h, --help", "this help").helpGroup("Flags:"))
    .addHelpText("after", AFTER)
    // `serve restore`'s flags are its own.
    .enablePositionalOptions();
  cmd
    .command("restore")
    .summary("a backup back into a data directory")
    .description(RESTORE_DESCRIPTION)
    .usage("--data-dir DIR [--from BACKUP]")
    .optionsGroup("Flags:")
    .addOption(dataDirOption("the data directory"))
    .addOption(value("--from <BACKUP>", "the copy to restore from", text))
    .addHelpOption(new Option("-h, --help", "this help").helpGroup("Flags:"))
    .addHelpText("after", "\nExit codes: 0 restored, 1 refused (serve runs on DIR, BACKUP is not a data directory), 2 bad usage.\n");
  (cmd.commands[0] as CliCommand).runs((c) => restore(restoreOptions(c)));
  return cmd.runs((c) => runServe(serveOptions(c)));
}

/** What serve is to do, from its parsed command line. */
export function serveOptions(cmd: Command): ServeOptions {
  if (typed(cmd, "adminToken")) {
    throw new UsageError(
      "--admin-token is not accepted by serve (a command line is visible to every user): use --admin-token-file FILE or JOIN_BROKER_ADMIN_TOKEN",
    );
  }
  const dir = dataDir(cmd);
  requireAll([...unset(cmd, "listen"), ...(dir === undefined ? [requirement(cmd, "dataDir")] : [])]);
  const v = cmd.opts<{
    listen: { host: string; port: number };
    tlsCert?: string;
    tlsKey?: string;
    insecureHttp?: true;
    issuer?: string;
    logLevel?: string;
    clientIpHeader?: string;
  }>();
  const { host, port } = v.listen;
  together(cmd, "tlsCert", "tlsKey");
  if (!v.tlsCert && !isLoopback(host) && !v.insecureHttp) {
    throw new UsageError(
      `refusing plain HTTP on ${host}, which is not a loopback address: give --tls-cert and --tls-key, or --insecure-http if a TLS proxy in front of it is the only client`,
    );
  }
  const adminToken = readSecret(cmd, "adminToken", "adminTokenFile");
  if (adminToken !== undefined && adminToken.length < 16) throw new UsageError("the admin token must be at least 16 characters long");
  if (adminToken !== undefined) bearerToken("the admin token", adminToken);
  return {
    host,
    port,
    dataDir: dir!,
    tls: v.tlsCert && v.tlsKey ? { cert: v.tlsCert, key: v.tlsKey } : undefined,
    adminToken,
    issuer: v.issuer,
    logLevel: v.logLevel,
    clientIpHeader: v.clientIpHeader,
  };
}

export function restoreOptions(cmd: Command): { dataDir: string; from: string | null } {
  const dir = dataDir(cmd);
  if (dir === undefined) requireAll([requirement(cmd, "dataDir")]);
  return { dataDir: dir!, from: (cmd.getOptionValue("from") as string | undefined) ?? null };
}

/** What a `join-broker serve` command line asks for, or null for --help (for checks of a command line). */
export function parseServe(argv: string[], env: NodeJS.ProcessEnv = process.env): ServeOptions | null {
  const cmd = parseOnly("serve", defineServe, argv, env);
  return cmd && serveOptions(cmd);
}

/** What a `join-broker serve restore` command line asks for (its arguments after `restore`), or null for --help. */
export function parseRestore(argv: string[], env: NodeJS.ProcessEnv = process.env): { dataDir: string; from: string | null } | null {
  const cmd = parseOnly("serve", defineServe, ["restore", ...argv], env);
  return cmd && restoreOptions(cmd);
}

async function runServe(options: ServeOptions): Promise<number> {
  const [{ DataDirError, layout }, { startSelfHosted }, { StartError }] = await Promise.all([
    import("../serve/data-dir.ts"),
    import("../serve/start.ts"),
    import("../serve/supervisor.ts"),
  ]);
  const log = (line: string) => process.stderr.write(`join-broker serve: ${line}\n`);
  const version = packageVersion();
  let supervisor: Supervisor;
  try {
    supervisor = await startSelfHosted(options, { softwareVersion: version, log, output: { stdout: process.stdout, stderr: process.stderr } });
  } catch (e) {
    if (e instanceof DataDirError || e instanceof StartError) {
      log(e.message);
      return EXIT.failure;
    }
    throw e;
  }
  const stop = stopOnSignals();
  void stop.stopped.then((signal) => {
    log(`${signal}: stopping workerd`);
    void supervisor.stop(signal);
  });
  process.stdout.write(`listening on ${supervisor.url}\n`);
  log(`workerd pid ${supervisor.pid}, data in ${layout(options.dataDir).root}, join-broker ${version}`);
  try {
    const code = await supervisor.done();
    log(code === 0 ? "stopped" : "stopped: workerd could not be kept running");
    return code;
  } finally {
    stop.release();
  }
}

/** `join-broker serve restore`: a backup back into a data directory, marked so that no cluster in it bootstraps unasked. */
async function restore({ dataDir, from }: { dataDir: string; from: string | null }): Promise<number> {
  const { DataDirError, layout, restoreDataDir } = await import("../serve/data-dir.ts");
  try {
    const record = restoreDataDir(dataDir, from);
    const root = layout(dataDir).root;
    process.stdout.write(
      `${record.from ? `restored ${record.from} into ${root}` : `marked ${root} restored`} (restore ${record.id}).\n` +
        `At the next start every cluster in it that looks never bootstrapped waits for an admin before any bootstrap:\n` +
        `  join-broker admin adopt --cluster NAME --member NODE=PEERURL …   if the cluster exists\n` +
        `  join-broker admin bootstrap allow --cluster NAME --reason TEXT    if it never formed\n`,
    );
    return EXIT.ok;
  } catch (e) {
    if (e instanceof DataDirError) {
      process.stderr.write(`join-broker serve restore: ${e.message}\n`);
      return EXIT.failure;
    }
    throw e;
  }
}
