/**
 * `join-broker serve` in the single executable file: not there. serve bundles the broker's sources
 * with esbuild and supervises workerd, both native binaries of their own packages, which one file
 * cannot carry; the npm package runs it (docs/install.md). Whatever follows `serve`, this says so.
 * @module
 */
import { EXIT } from "../exit-codes.ts";
import type { CliCommand } from "./command.ts";

export function defineServe(cmd: CliCommand): CliCommand {
  return cmd
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .runs(async () => {
      process.stderr.write(
        "join-broker serve: not part of the single executable file (it runs workerd, a separate binary); install the npm package to self-host the broker (docs/install.md)\n",
      );
      return EXIT.usage;
    });
}
