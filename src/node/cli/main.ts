/**
 * `join-broker`: the node agent (`join`), the reference join API (`controller`), the admin
 * client (`admin`) and the self-hosted broker (`serve`).
 * @module
 */
import { Command, CommanderError, Option } from "commander";
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
  "etcd-cert": { summary: "an etcd client certificate (root, kube-apiserver) signed with the cluster's CA, for etcdctl", load: () => import("./etcd-cert.ts") },
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

const ROOT_FLAGS = ["-h", "--help", "-v", "--version", "-V"];

/** What the command line asks for: a command and its own arguments, help (on a topic), or the version. */
type Request = { run: string; args: string[] } | { help: string[] } | { version: true } | { unknown: string } | { none: true };

/**
 * The top level: which command runs. Each command parses its own flags (commander, src/node/cli/flags.ts)
 * once its module is loaded, so a command's flags are read only by the command that runs.
 */
function parseRequest(argv: string[]): Request {
  let request: Request | undefined;
  const program = new Command("join-broker")
    .exitOverride()
    .configureOutput({ writeOut: () => {}, writeErr: () => {} })
    .enablePositionalOptions()
    .helpCommand(false)
    .option("-v, --version")
    .addOption(new Option("-V").hideHelp())
    .allowExcessArguments()
    .action(() => {
      request = program.args.length ? { unknown: program.args[0] } : { none: true };
    });
  for (const name of Object.keys(COMMANDS)) {
    program
      .command(name)
      .helpOption(false)
      .allowUnknownOption()
      .passThroughOptions()
      .argument("[args...]")
      .action(() => {
        // Everything after the command's name, as typed: commander would drop a `--` it passes on,
        // and the top level's flags (-h, -v, -V) take no value, so the first `name` is the command.
        request = { run: name, args: argv.slice(argv.indexOf(name) + 1) };
      });
  }
  program.command("help").helpOption(false).allowUnknownOption().argument("[topic...]").action((topic: string[]) => {
    request = { help: topic };
  });
  program.command("version").action(() => {
    request = { version: true };
  });
  try {
    program.parse(argv, { from: "user" });
  } catch (e) {
    if (e instanceof CommanderError && e.code === "commander.helpDisplayed") return { help: [] };
    // Only flags before the command are the top level's: the first one it does not know.
    if (e instanceof CommanderError && e.code === "commander.unknownOption") return { unknown: argv.find((a) => a.startsWith("-") && !ROOT_FLAGS.includes(a))!.split("=")[0] };
    throw e;
  }
  // A version flag before the command wins, as `--version` alone does.
  const { version, V } = program.opts<{ version?: true; V?: true }>();
  return version || V ? { version: true } : request!;
}

export async function main(argv: string[]): Promise<number> {
  const request = parseRequest(argv);
  if ("none" in request) {
    // No command at all: the overview, as bad usage.
    process.stdout.write(USAGE);
    return EXIT.usage;
  }
  if ("unknown" in request) return await unknown(request.unknown);
  if ("version" in request) {
    process.stdout.write(`join-broker ${version()} (protocol v1.1)\n`);
    return EXIT.ok;
  }
  if ("help" in request) return help(request.help);
  const { run: name, args: rest } = request;
  try {
    let args = rest;
    if (CA_FILE_COMMANDS.has(name)) {
      const { caFile, rest: withoutCa } = extractCaFile(rest);
      if (caFile !== undefined && !trustCaFile(caFile)) return await rerunWithExtraCa(caFile, [name, ...withoutCa]);
      args = withoutCa;
    }
    return await (await COMMANDS[name].load()).run(args);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`join-broker ${name}: ${e.message}\nRun 'join-broker ${name} --help' for usage.\n`);
      return EXIT.usage;
    }
    process.stderr.write(`join-broker ${name}: ${e instanceof Error ? e.message : String(e)}\n`);
    return EXIT.failure;
  }
}

/** `join-broker help join` is `join-broker join --help`; `help admin status` likewise. */
async function help([topic, ...more]: string[]): Promise<number> {
  if (topic === undefined) {
    process.stdout.write(USAGE);
    return EXIT.ok;
  }
  if (COMMANDS[topic]) return main([topic, ...more, "--help"]);
  process.stderr.write(`join-broker help: unknown command '${topic}'${didYouMean(topic, Object.keys(COMMANDS))}\n\n${USAGE}`);
  return EXIT.usage;
}

async function unknown(name: string): Promise<number> {
  if (name.startsWith("-")) {
    process.stderr.write(`join-broker: unknown flag '${name}'${didYouMean(name, ROOT_FLAGS.filter((f) => f.startsWith("--")))}\n\n${USAGE}`);
    return EXIT.usage;
  }
  // An admin subcommand typed without 'admin' is a common slip: suggest it too.
  const { COMMANDS: ADMIN_COMMANDS } = await import("./admin-commands.ts");
  const known = [...Object.keys(COMMANDS), ...ADMIN_COMMANDS.map((c) => `admin ${c.words.join(" ")}`)];
  const near = didYouMean(name, Object.keys(COMMANDS)) || didYouMean(`admin ${name}`, known);
  process.stderr.write(`join-broker: unknown command '${name}'${near}\n\n${USAGE}`);
  return EXIT.usage;
}
