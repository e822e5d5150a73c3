/**
 * `join-broker`: the node agent (`join`), the reference join API (`controller`), the admin
 * client (`admin`), operators' etcd certificates (`etcd-cert`) and the self-hosted broker
 * (`serve`), as one commander program. Each command's flags, help and checks live in its own
 * module, loaded once the command line names it, so that a command loads only its own code (and
 * the single executable file can leave `serve` out).
 * @module
 */
import { CommanderError, Option } from "commander";
import { EXIT, UsageError } from "../exit-codes.ts";
import { packageVersion } from "../package-root.ts";
import { CONTRACT_VERSION } from "../../shared/protocol/wire.ts";
import { inSingleExecutable } from "../single-executable.ts";
import { CliCommand, leafCommands, NoSubcommand, PRINTED } from "./command.ts";
import { didYouMean } from "./suggest.ts";

/** The package's version, from its package.json. */
export const version = packageVersion;

type Define = (cmd: CliCommand) => CliCommand;

export const COMMANDS: Record<string, { summary: string; load: () => Promise<Define> }> = {
  join: { summary: "node agent: wait for admission, join etcd, report completion", load: async () => (await import("./join.ts")).defineJoin },
  controller: {
    summary: "reference join API: verify admission tokens, add etcd learners, promote",
    load: async () => (await import("./controller.ts")).defineController,
  },
  admin: { summary: "admin client: enrollment tokens, status, revoke, pause, policy, keys, audit", load: async () => (await import("./admin.ts")).defineAdmin },
  "etcd-cert": {
    summary: "an etcd client certificate for etcdctl (root, kube-apiserver) from the cluster's CA",
    load: async () => (await import("./etcd-cert.ts")).defineEtcdCert,
  },
  serve: {
    summary: inSingleExecutable()
      ? "not in this single file: the self-hosted broker runs from the npm package"
      : "the broker itself, self-hosted on workerd with its state on local disk",
    load: async () => (await import("./serve.ts")).defineServe,
  },
};

const AFTER = `
Run 'join-broker <command> --help' (or 'join-broker help <command>') for a command's flags, 'join-broker --version' for the version.
Exit codes: 0 ok, 2 bad usage, 3 refused (revoked, forbidden), 4 gave up.
`;

/** What the command line ran: the command below `join-broker`, and the one whose action ran. */
interface Dispatch {
  top?: string;
  ran?: CliCommand;
}

/** The whole command line: every command, defined when it is named. */
export function program(dispatch: Dispatch = {}): CliCommand {
  const root = new CliCommand("join-broker")
    .usage("<command> [flags]")
    // A flag before the command is the top level's; after it, the command's own.
    .enablePositionalOptions()
    .addOption(new Option("-v, --version", "print the version").hideHelp())
    .addOption(new Option("-V").hideHelp())
    .addHelpOption(new Option("-h, --help", "this help").hideHelp())
    .argument("[words...]")
    .addHelpText("after", AFTER);
  for (const [name, { summary }] of Object.entries(COMMANDS)) root.command(name).summary(summary);
  root
    .command("help")
    .summary("a command's help: 'join-broker help admin status' is 'join-broker admin status --help'")
    .argument("[topic...]")
    .runs(async (cmd) => help(cmd.processedArgs[0] as string[]));
  root.command("version", { hidden: true }).runs(async () => printVersion());
  root.hook("preSubcommand", async (_root, sub) => {
    // A version flag before the command wins, as `--version` alone does.
    if (versionAsked(root)) {
      printVersion();
      throw new CommanderError(0, "commander.version", "(version)");
    }
    dispatch.top = sub.name();
    const command = COMMANDS[sub.name()];
    if (command) (await command.load())(sub as CliCommand);
  });
  root.hook("preAction", (_root, action) => {
    dispatch.ran = action as CliCommand;
  });
  return root.runs(async (cmd) => {
    if (versionAsked(cmd)) return printVersion();
    const [words] = cmd.processedArgs as [string[]];
    if (words.length) throw await unknownCommand(words[0]);
    // No command at all: the overview, as bad usage.
    process.stdout.write(cmd.helpInformation());
    return EXIT.usage;
  });
}

function versionAsked(root: CliCommand): boolean {
  const { version, V } = root.opts<{ version?: true; V?: true }>();
  return version === true || V === true;
}

function printVersion(): number {
  process.stdout.write(`join-broker ${version()} (protocol v${CONTRACT_VERSION})\n`);
  return EXIT.ok;
}

export async function main(argv: string[]): Promise<number> {
  const dispatch: Dispatch = {};
  const root = program(dispatch);
  try {
    await root.parseAsync(argv, { from: "user" });
    return dispatch.ran?.exitCode ?? EXIT.ok;
  } catch (e) {
    if (e instanceof CommanderError && PRINTED.has(e.code)) return EXIT.ok;
    if (e instanceof NoSubcommand) {
      process.stderr.write(e.help);
      return EXIT.usage;
    }
    const top = dispatch.top;
    if (e instanceof UsageError && (top === undefined || top === "help")) {
      process.stderr.write(`join-broker${top ? ` ${top}` : ""}: ${e.message}\n\n${root.helpInformation()}`);
      return EXIT.usage;
    }
    if (e instanceof UsageError) {
      process.stderr.write(`join-broker ${top}: ${e.message}\nRun 'join-broker ${top} --help' for usage.\n`);
      return EXIT.usage;
    }
    process.stderr.write(`join-broker${top ? ` ${top}` : ""}: ${e instanceof Error ? e.message : String(e)}\n`);
    return EXIT.failure;
  }
}

/** `join-broker help join` is `join-broker join --help`; `help admin status` likewise. */
async function help(topic: string[]): Promise<number> {
  if (topic.length === 0) return main(["--help"]);
  if (COMMANDS[topic[0]]) return main([...topic, "--help"]);
  throw await unknownCommand(topic[0]);
}

/** A command nobody has: the closest one, or an admin subcommand typed without 'admin' (a common slip). */
async function unknownCommand(name: string): Promise<UsageError> {
  const admin = (await COMMANDS.admin.load())(new CliCommand("admin"));
  const known = [...Object.keys(COMMANDS), ...leafCommands(admin).map((l) => `admin ${l.words.join(" ")}`)];
  const near = didYouMean(name, Object.keys(COMMANDS)) || didYouMean(`admin ${name}`, known);
  return new UsageError(`unknown command '${name}'${near}`);
}
