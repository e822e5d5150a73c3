/**
 * `join-broker serve`: the broker on workerd, self-hosted (see docs/self-hosting.md).
 * @module
 */
import { DataDirError, layout } from "../serve/data-dir.ts";
import { parseServeArgs, SERVE_HELP } from "../serve/serve-options.ts";
import { startSelfHosted } from "../serve/start.ts";
import { StartError, type Supervisor } from "../serve/supervisor.ts";
import { EXIT } from "../exit-codes.ts";
import { packageVersion } from "../package-root.ts";

export async function run(argv: string[]): Promise<number> {
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
