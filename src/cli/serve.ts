/**
 * `join-broker serve`: the broker on workerd, self-hosted (see docs/self-hosting.md).
 * @module
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { bundleWorker } from "../selfhost/bundle.ts";
import { workerdConfig } from "../selfhost/config.ts";
import { DataDirError, layout, openDataDir } from "../selfhost/data-dir.ts";
import { parseServeArgs, SERVE_HELP } from "../selfhost/options.ts";
import { claimRunDir, StartError, Supervisor, workerdBinary } from "../selfhost/supervisor.ts";
import { EXIT } from "./exit-codes.ts";

function softwareVersion(): string {
  const pkg = JSON.parse(readFileSync(join(import.meta.dirname, "../../package.json"), "utf8")) as { version: string };
  return pkg.version;
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseServeArgs(argv, process.env);
  if (parsed.help) {
    process.stdout.write(SERVE_HELP);
    return EXIT.ok;
  }
  const options = parsed.options;
  const log = (line: string) => process.stderr.write(`join-broker serve: ${line}\n`);
  const version = softwareVersion();

  const paths = layout(options.dataDir);
  const configPath = join(paths.run, "workerd.capnp");
  let supervisor: Supervisor;
  try {
    await claimRunDir(paths.run, configPath);
    const dir = openDataDir(options.dataDir, version);
    if (dir.created) log(`created data directory ${dir.root}`);
    for (const format of dir.migrated) log(`migrated data directory ${dir.root} to format ${format}`);
    writeFileSync(join(dir.run, "serve.pid"), `${process.pid}\n`);
    const bundle = join(dir.run, "worker.js");
    await bundleWorker(bundle);
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
      }),
      { mode: 0o600 },
    );
    const wildcard = options.host === "0.0.0.0" || options.host === "::";
    supervisor = new Supervisor(
      {
        workerd: workerdBinary(),
        config: configPath,
        runDir: dir.run,
        adminToken: options.adminToken,
        probeHost: wildcard ? (options.host === "::" ? "::1" : "127.0.0.1") : options.host,
        tls: options.tls !== undefined,
        log,
        output: { stdout: process.stdout, stderr: process.stderr },
      },
      { host: options.host, port: options.port },
    );
    await supervisor.start();
  } catch (e) {
    if (e instanceof DataDirError || e instanceof StartError) {
      log(e.message);
      return EXIT.failure;
    }
    throw e;
  }

  const onSignal = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping workerd`);
    void supervisor.stop(signal);
  };
  const onInt = () => onSignal("SIGINT");
  const onTerm = () => onSignal("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  process.stdout.write(`listening on ${supervisor.url}\n`);
  log(`workerd pid ${supervisor.pid}, data in ${paths.root}, join-broker ${version}`);
  try {
    return await supervisor.done();
  } finally {
    process.off("SIGINT", onInt);
    process.off("SIGTERM", onTerm);
  }
}
