/**
 * Starting the self-hosted broker: data directory, bundle, workerd configuration, supervised
 * workerd. `join-broker serve` is this plus flags and signals; the benchmarks start the bench
 * Worker the same way.
 * @module
 */
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { bundleWorker, WORKER_ENTRY } from "./bundle.ts";
import { workerdConfig } from "./config.ts";
import { layout, lockDataDir, openDataDir, readRestore, storedAdminToken, type DataDir } from "./data-dir.ts";
import { claimRunDir, Supervisor, workerdBinary } from "./supervisor.ts";

/** What to serve: `join-broker serve` reads it from its flags (src/node/cli/serve.ts). */
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

export interface StartOptions {
  softwareVersion: string;
  log: (line: string) => void;
  output: { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream };
  /** The Worker module to bundle (default: the broker, src/broker/selfhost/worker.ts). */
  entry?: string;
}

/** Resolves with the running supervisor once the broker answers; throws DataDirError or StartError. */
export async function startSelfHosted(options: ServeOptions, how: StartOptions): Promise<Supervisor> {
  const paths = layout(options.dataDir);
  const configPath = join(paths.run, "workerd.capnp");
  const lock = lockDataDir(options.dataDir);
  let dir: DataDir;
  try {
    await claimRunDir(paths.run, configPath);
    dir = openDataDir(options.dataDir, how.softwareVersion);
  } catch (e) {
    lock.unlock();
    throw e;
  }
  if (dir.created) how.log(`created data directory ${dir.root}`);
  for (const format of dir.migrated) how.log(`migrated data directory ${dir.root} to format ${format}`);
  writeFileSync(join(dir.run, "serve.pid"), `${process.pid}\n`);
  let adminToken = options.adminToken;
  if (adminToken === undefined) {
    const stored = storedAdminToken(dir.root);
    adminToken = stored.token;
    how.log(
      stored.created ? `made a random admin token in ${stored.file} (read it from there: ADMIN=$(cat ${stored.file}))` : `admin token from ${stored.file}`,
    );
  }
  const restore = readRestore(dir.root);
  if (restore)
    how.log(
      `data directory restored at ${restore.at}: each cluster takes note once, and one that looks never bootstrapped waits for an admin before any bootstrap`,
    );
  const bundle = join(dir.run, "worker.js");
  await bundleWorker(bundle, how.entry ?? WORKER_ENTRY);
  writeFileSync(
    configPath,
    workerdConfig({
      configDir: dir.run,
      bundle,
      storageDir: dir.storage,
      address: `${options.host.includes(":") ? `[${options.host}]` : options.host}:${options.port}`,
      tls: options.tls && { cert: resolve(options.tls.cert), key: resolve(options.tls.key) },
      issuer: options.issuer,
      logLevel: options.logLevel,
      clientIpHeader: options.clientIpHeader,
      restoreId: restore?.id,
    }),
    { mode: 0o600 },
  );
  const wildcard = options.host === "0.0.0.0" || options.host === "::";
  const supervisor = new Supervisor(
    {
      workerd: workerdBinary(),
      config: configPath,
      runDir: dir.run,
      adminToken,
      probeHost: wildcard ? (options.host === "::" ? "::1" : "127.0.0.1") : options.host,
      tls: options.tls !== undefined,
      log: how.log,
      output: how.output,
    },
    { host: options.host, port: options.port },
  );
  await supervisor.start();
  return supervisor;
}
