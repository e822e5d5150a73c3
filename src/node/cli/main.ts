/**
 * `join-broker`: the node agent (`join`), the reference join API (`controller`), the admin
 * client (`admin`) and the self-hosted broker (`serve`).
 * @module
 */
import { CA_FILE_COMMANDS, extractCaFile, rerunWithExtraCa, trustCaFile } from "./ca-file.ts";
import { EXIT, UsageError } from "../exit-codes.ts";
import { didYouMean } from "./suggest.ts";
import { packageVersion } from "../package-root.ts";
import { inSingleExecutable } from "../single-executable.ts";

/** The package's version, from its package.json. */
export const version = packageVersion;

const COMMANDS: Record<string, { summary: string; load: () => Promise<{ run(argv: string[]): Promise<number> }> }> = {
  join: { summary: "node agent: wait for admission, join etcd, report completion", load: () => import("./join.ts") },
  controller: { summary: "reference join API: verify admission tokens, add etcd learners, promote", load: () => import("./controller.ts") },
  admin: { summary: "admin client: enrollment tokens, status, revoke, pause, policy, keys, audit", load: () => import("./admin.ts") },
  serve: {
    summary: inSingleExecutable()
      ? "not in this single file: the self-hosted broker runs from the npm package (docs/install.md)"
      : "the broker itself, self-hosted on workerd with its state on local disk",
    load: () => import("./serve.ts"),
  },
};

export const USAGE = `Usage: join-broker <command> [flags]

Commands:
${Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(11)} ${c.summary}`).join("\n")}

Run 'join-broker <command> --help' (or 'join-broker help <command>') for a command's flags, 'join-broker --version' for the version.
Exit codes: 0 ok, 2 bad usage, 3 refused (revoked, forbidden), 4 gave up.
`;

export async function main(argv: string[]): Promise<number> {
  if (argv[0] === "help" && argv.length > 1) {
    // `join-broker help join` is `join-broker join --help`; `help admin status` likewise.
    const [, topic, ...more] = argv;
    if (COMMANDS[topic]) return main([topic, ...more, "--help"]);
    process.stderr.write(`join-broker help: unknown command '${topic}'${didYouMean(topic, Object.keys(COMMANDS))}\n\n${USAGE}`);
    return EXIT.usage;
  }
  const [name, ...rest] = argv;
  if (!name || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(USAGE);
    return name ? EXIT.ok : EXIT.usage;
  }
  if (name === "--version" || name === "-v" || name === "-V" || name === "version") {
    process.stdout.write(`join-broker ${version()} (protocol v1.1)\n`);
    return EXIT.ok;
  }
  const command = COMMANDS[name];
  if (!command) {
    // An admin subcommand typed without 'admin' is a common slip: suggest it too.
    const { COMMANDS: ADMIN_COMMANDS } = await import("./admin-commands.ts");
    const known = [...Object.keys(COMMANDS), ...ADMIN_COMMANDS.map((c) => `admin ${c.words.join(" ")}`)];
    const near = didYouMean(name, Object.keys(COMMANDS)) || didYouMean(`admin ${name}`, known);
    process.stderr.write(`join-broker: unknown command '${name}'${near}\n\n${USAGE}`);
    return EXIT.usage;
  }
  try {
    let args = rest;
    if (CA_FILE_COMMANDS.has(name)) {
      const { caFile, rest: withoutCa } = extractCaFile(rest);
      if (caFile !== undefined && !trustCaFile(caFile)) return await rerunWithExtraCa(caFile, [name, ...withoutCa]);
      args = withoutCa;
    }
    return await (await command.load()).run(args);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`join-broker ${name}: ${e.message}\nRun 'join-broker ${name} --help' for usage.\n`);
      return EXIT.usage;
    }
    process.stderr.write(`join-broker ${name}: ${e instanceof Error ? e.message : String(e)}\n`);
    return EXIT.failure;
  }
}
