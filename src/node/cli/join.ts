/**
 * `join-broker join`: the node agent (see src/node/agent/agent.ts and docs/agent.md).
 * @module
 */
import { runAgent } from "../agent/agent.ts";
import { Stopped } from "../agent/errors.ts";
import { JOIN_HELP, parseJoinArgs } from "../agent/join-options.ts";
import { createReporter } from "../agent/progress.ts";
import { EXIT } from "../exit-codes.ts";

export async function run(argv: string[]): Promise<number> {
  const parsed = parseJoinArgs(argv);
  if (parsed.help) {
    process.stdout.write(JOIN_HELP);
    return EXIT.ok;
  }
  const options = parsed.options;
  const reporter = createReporter({ format: options.logFormat, node: options.node, verbose: options.verbose });

  // The first signal stops the agent cleanly (etcd too); a second one does not wait any longer.
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    if (stop.signal.aborted) process.exit(new Stopped(signal).exitCode);
    stop.abort(new Stopped(signal));
  };
  const onInt = () => onSignal("SIGINT");
  const onTerm = () => onSignal("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  try {
    return await runAgent(options, { reporter, stop: stop.signal, print: (line) => process.stdout.write(`${line}\n`) });
  } finally {
    process.off("SIGINT", onInt);
    process.off("SIGTERM", onTerm);
  }
}
