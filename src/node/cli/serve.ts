/**
 * `join-broker serve`: the broker on workerd, self-hosted (see docs/self-hosting.md).
 * @module
 */
import { DataDirError, layout, restoreDataDir } from "../serve/data-dir.ts";
import { parseRestoreArgs, parseServeArgs, RESTORE_HELP, SERVE_HELP } from "../serve/serve-options.ts";
import { startSelfHosted } from "../serve/start.ts";
import { StartError, type Supervisor } from "../serve/supervisor.ts";
import { EXIT } from "../exit-codes.ts";
import { packageVersion } from "../package-root.ts";

export async function run(argv: string[]): Promise<number> {
  if (argv[0] === "restore") return restore(argv.slice(1));
  const parsed = parseServeArgs(argv, process.env);
  if (parsed.help) {
    process.stdout.write(SERVE_HELP);
    return EXIT.ok;
  }
  const options = parsed.options;
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

  const onSignal = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping workerd`);
    void supervisor.stop(signal);
  };
  const onInt = () => onSignal("SIGINT");
  const onTerm = () => onSignal("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  process.stdout.write(`listening on ${supervisor.url}\n`);
  log(`workerd pid ${supervisor.pid}, data in ${layout(options.dataDir).root}, join-broker ${version}`);
  try {
    const code = await supervisor.done();
    log(code === 0 ? "stopped" : "stopped: workerd could not be kept running");
    return code;
  } finally {
    process.off("SIGINT", onInt);
    process.off("SIGTERM", onTerm);
  }
}

/** `join-broker serve restore`: a backup back into a data directory, marked so that no cluster in it bootstraps unasked. */
function restore(argv: string[]): number {
  const parsed = parseRestoreArgs(argv, process.env);
  if (parsed.help) {
    process.stdout.write(RESTORE_HELP);
    return EXIT.ok;
  }
  try {
    const record = restoreDataDir(parsed.dataDir, parsed.from);
    const root = layout(parsed.dataDir).root;
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
