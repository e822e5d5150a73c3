/**
 * `join-broker admin SUBCOMMAND --cluster NAME --broker URL --admin-token TOKEN [--json]`: the
 * admin API from a shell. The connection flags may come before or after the subcommand; the
 * broker URL, the admin token and the cluster may come from JOIN_BROKER_URL,
 * JOIN_BROKER_ADMIN_TOKEN and JOIN_BROKER_CLUSTER instead.
 * @module
 */
import { Option, type Command } from "commander";
import { BrokerClient, BrokerProblem, BrokerUnreachable, InvalidInput, type AdminClient, type Reply } from "../../shared/client/index.ts";
import { EXIT, UsageError } from "../exit-codes.ts";
import { COMMANDS, type AdminCommand } from "./admin-commands.ts";
import { ADMIN_FLAGS, inFlagTerms, type AdminFlagName, type Values } from "./admin-flags.ts";
import { caFileOption, withCaFile } from "./ca-file.ts";
import { leafCommands, requireAll, secretRequirement, typed, unset, type CliCommand } from "./command.ts";
import { stopOnSignals } from "./signals.ts";
import { choice, httpUrl, number, readSecret, text, value, type Reader } from "./values.ts";

const EXIT_CODES = `
Exit codes:
  0  done
  1  the broker answered with an error (its problem code and detail go to stderr),
     or could not be reached
  2  bad usage: unknown subcommand or flag, missing or invalid argument (nothing was sent)
  3  refused: the admin token is wrong, or the call is forbidden (HTTP 401/403), or too many
     failed authentications from this address (HTTP 429 rate_limited)
`;

const CONNECTION = "Connection (every subcommand):";
const CONNECTION_SYNOPSIS = "--cluster NAME [--broker URL] [--admin-token TOKEN] [--json]";

export function defineAdmin(cmd: CliCommand): CliCommand {
  cmd
    .usage(`SUBCOMMAND [ARGS] ${CONNECTION_SYNOPSIS}`)
    // The connection flags are admin's own, read before or after the subcommand.
    .enablePositionalOptions(false)
    .optionsGroup(CONNECTION)
    .addOption(value("--cluster <NAME>", "the cluster", text).env("JOIN_BROKER_CLUSTER"))
    .addOption(value("--broker <URL>", "the broker's base URL", httpUrl).env("JOIN_BROKER_URL"))
    .addOption(
      value(
        "--admin-token <TOKEN>",
        "the broker's ADMIN_TOKEN, or a read-only credential for reads; prefer the environment or --admin-token-file: flags are visible to other local users",
        text,
      ).env("JOIN_BROKER_ADMIN_TOKEN"),
    )
    .addOption(value("--admin-token-file <PATH>", "read the admin token from a file", text))
    .addOption(value("--timeout-seconds <N>", "give up on a request after N seconds (default 30)", number({ min: 1, whole: true, unit: "seconds" })))
    .addOption(new Option("--json", "print the broker's JSON response body exactly, and nothing else; on a broker error, its problem+json body"))
    .addOption(caFileOption())
    .addHelpOption(new Option("-h, --help", "this text; 'join-broker admin SUBCOMMAND --help' for one subcommand").helpGroup(CONNECTION))
    .addHelpText("after", EXIT_CODES)
    // Every subcommand by its words ("token create"), not the groups they make.
    .configureHelp({ ...cmd.configureHelp(), visibleCommands: (c: Command) => (c === cmd ? leafCommands(cmd).map((l) => l.command) : [...c.commands]) });
  for (const c of COMMANDS) defineSubcommand(cmd, c);
  return cmd;
}

/** A flag of the table as an option of one subcommand. */
function adminOption(name: AdminFlagName): Option {
  const flag = ADMIN_FLAGS[name];
  if ("choices" in flag) return choice(flag.flags, flag.description, flag.choices);
  if ("read" in flag) return value(flag.flags, flag.description, flag.read as Reader<unknown>);
  return new Option(flag.flags, flag.description);
}

/** `revoke JTI --reason TEXT`, `tickets [--state STATE] [--limit N] [--after SEQ]`: from the subcommand's flags. */
function synopsis(c: AdminCommand): string {
  const flag = (name: AdminFlagName) => ADMIN_FLAGS[name].flags.replace(/^-\w, /, "").replace(/ <([^>]+)>/, " $1");
  return [...c.args, ...c.flags.map((f) => (c.required?.includes(f) ? flag(f) : `[${flag(f)}]`))].join(" ");
}

function defineSubcommand(admin: CliCommand, c: AdminCommand): void {
  let parent: Command = admin;
  for (const word of c.words.slice(0, -1)) parent = parent.commands.find((x) => x.name() === word) ?? parent.command(word).summary(`the ${word} subcommands`);
  const name = c.words.at(-1)!;
  const sub = (parent.commands.find((x) => x.name() === name) as CliCommand | undefined) ?? (parent.command(name) as CliCommand);
  sub
    .helpGroup("Subcommands:")
    .summary(c.summary)
    .description(`${c.summary.charAt(0).toUpperCase()}${c.summary.slice(1)}.${c.details ? `\n${c.details}` : ""}`)
    .usage(synopsis(c))
    .configureHelp({
      ...sub.configureHelp(),
      showGlobalOptions: true,
      commandUsage: () => ["join-broker admin", ...c.words, synopsis(c), CONNECTION_SYNOPSIS].filter(Boolean).join(" "),
    })
    .addHelpOption(new Option("-h, --help", "this help"))
    .addHelpText("after", "\nRun 'join-broker admin --help' for the exit codes.\n");
  for (const a of c.args) sub.argument(`<${a}>`);
  for (const f of c.flags) sub.addOption(adminOption(f));
  sub.runs((leaf) => withCaFile(leaf, () => runSubcommand(admin, leaf, c)));
}

interface Connection {
  cluster?: string;
  broker?: string;
  timeoutSeconds?: number;
  json?: true;
}

async function runSubcommand(admin: CliCommand, leaf: CliCommand, command: AdminCommand): Promise<number> {
  const name = command.words.join(" ");
  const { cluster, broker, timeoutSeconds, json } = admin.opts<Connection>();
  const token = readSecret(admin, "adminToken", "adminTokenFile");
  requireAll([
    ...(command.perCluster === false ? [] : unset(admin, "cluster")),
    ...unset(admin, "broker"),
    ...(token === undefined ? [secretRequirement(admin, "the admin token", "adminToken", "adminTokenFile")] : []),
    ...unset(leaf, ...(command.required ?? [])),
  ]);
  const values: Values = {
    ...leaf.opts<Values>(),
    // What was typed: a subcommand that reads --cluster itself (credentials create) never takes JOIN_BROKER_CLUSTER.
    cluster: typed(admin, "cluster") ? cluster : undefined,
    json,
  };
  const stop = command.follows?.(values) ? stopOnSignals() : null;
  try {
    let brokerClient: BrokerClient;
    let client: AdminClient | undefined;
    try {
      brokerClient = new BrokerClient({
        baseUrl: broker!,
        bearer: token!,
        timeoutMs: timeoutSeconds ? timeoutSeconds * 1000 : undefined,
        userAgent: "join-broker-admin/1",
      });
      client = cluster ? brokerClient.admin(cluster) : undefined;
    } catch (e) {
      throw new UsageError(e instanceof InvalidInput ? `--${e.message}` : `--broker: ${(e as Error).message}`);
    }
    await command.run({
      // Commands that are not about one cluster (perCluster: false) never read it.
      client: client as AdminClient,
      broker: brokerClient,
      args: leaf.processedArgs as string[],
      values,
      signal: stop?.signal ?? new AbortController().signal,
      note: (text) => process.stderr.write(`join-broker admin ${name}: ${text}\n`),
      print: (reply: Reply<unknown>, human: () => string) => process.stdout.write(json ? `${reply.text.trimEnd()}\n` : human()),
    });
    return EXIT.ok;
  } catch (e) {
    if (e instanceof InvalidInput) throw new UsageError(inFlagTerms(e, leaf));
    if (e instanceof BrokerProblem) {
      if (json) process.stdout.write(`${e.text.trimEnd()}\n`);
      process.stderr.write(`join-broker admin ${name}: the broker refused: ${e.code} (HTTP ${e.status}): ${e.problem.detail}${hint(e, cluster ?? "", name)}\n`);
      // rate_limited answers only failed authentications: it is a refusal like the 401s before it.
      return e.refused || e.code === "rate_limited" ? EXIT.refused : EXIT.failure;
    }
    if (e instanceof BrokerUnreachable) {
      process.stderr.write(`join-broker admin ${name}: ${e.message}\n`);
      return EXIT.failure;
    }
    throw e;
  } finally {
    stop?.release();
  }
}

/** What to check next, for the problems an operator meets most. */
function hint(e: BrokerProblem, cluster: string, command: string): string {
  switch (e.code) {
    case "unauthorized":
      return "\n  check --admin-token / JOIN_BROKER_ADMIN_TOKEN against the broker's ADMIN_TOKEN secret";
    case "rate_limited":
      return `\n  too many failed authentications from this address; wait ${e.retryAfter ?? 60} s and check the admin token`;
    case "unknown_cluster":
      // The broker's detail already says how a cluster comes to exist: do not say it twice.
      return (
        `\n  check --cluster (${cluster}) and JOIN_BROKER_CLUSTER for a typo; 'join-broker admin clusters' lists the clusters` +
        (command === "token create" ? `\n  to create cluster ${cluster}, run 'join-broker admin token create --cluster ${cluster} --new-cluster'` : "")
      );
    case "forbidden":
      return "\n  the admin token is a read-only credential: it reads (status, tickets, audit, metrics) and changes nothing; use the ADMIN_TOKEN to write";
    case "admission_not_found":
      return "\n  'join-broker admin tickets' lists each admitted ticket's JTI";
    default:
      return "";
  }
}
