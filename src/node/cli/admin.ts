/**
 * `join-broker admin SUBCOMMAND --cluster NAME --broker URL --admin-token TOKEN [--json]`: the
 * admin API from a shell. Flags may come before or after the subcommand; the broker URL and the
 * admin token may come from JOIN_BROKER_URL and JOIN_BROKER_ADMIN_TOKEN instead.
 * @module
 */
import { readFileSync } from "node:fs";
import { BrokerClient, BrokerProblem, BrokerUnreachable, InvalidInput, type AdminClient, type Reply } from "../../shared/client/index.ts";
import { COMMANDS, type AdminCommand, type Values } from "./admin-commands.ts";
import { EXIT, UsageError } from "../exit-codes.ts";
import { closest, didYouMean } from "./suggest.ts";
import { defineCommand, parseCommand, type FlagSpec } from "./flags.ts";

const CONNECTION_FLAGS = {
  cluster: { value: "NAME", env: "JOIN_BROKER_CLUSTER" },
  broker: { value: "URL", env: "JOIN_BROKER_URL" },
  "admin-token": { value: "TOKEN", env: "JOIN_BROKER_ADMIN_TOKEN" },
  "admin-token-file": "PATH",
  "timeout-seconds": "N",
  json: true,
} as const satisfies Record<string, FlagSpec>;

/** Flags of one subcommand or another (AdminCommand.options says which). */
const COMMAND_FLAGS = {
  ttl: "DURATION",
  "max-uses": "N",
  description: "TEXT",
  state: "STATE",
  limit: "N",
  after: "SEQ",
  reason: "TEXT",
  "max-in-flight": "N",
  "lease-seconds": "SECONDS",
  "admission-ttl-seconds": "SECONDS",
  "max-queue": "N",
  member: { value: "NODE=PEERURL", repeat: true },
  nodes: { value: "PATTERNS", repeat: true },
  "peer-hosts": { value: "HOSTS", repeat: true },
  follow: { switch: true, short: "f" },
  "new-cluster": true,
  "read-only": true,
} as const satisfies Record<string, FlagSpec>;

export const ADMIN_FLAGS = { ...CONNECTION_FLAGS, ...COMMAND_FLAGS };

export const ADMIN_USAGE = `Usage: join-broker admin SUBCOMMAND [ARGS] --cluster NAME [--broker URL] [--admin-token TOKEN] [--json]

Subcommands:
${COMMANDS.map((c) => `  ${c.synopsis}\n      ${c.summary}`).join("\n")}

Connection (every subcommand):
  --cluster NAME             the cluster (or JOIN_BROKER_CLUSTER)
  --broker URL               the broker's base URL (or JOIN_BROKER_URL)
  --admin-token TOKEN        the broker's ADMIN_TOKEN, or a read-only credential for reads
                             (or JOIN_BROKER_ADMIN_TOKEN); prefer the
                             environment or --admin-token-file: flags are visible to other local users
  --admin-token-file PATH    read the admin token from a file
  --timeout-seconds N        give up on a request after N seconds (default 30)
  --json                     print the broker's JSON response body exactly, and nothing else;
                             on a broker error, its problem+json body
  --ca-file FILE             PEM file of CA certificates to trust for HTTPS to the broker
                             (a private CA), besides the system's; NODE_EXTRA_CA_CERTS works too
  -h, --help                 this text; 'join-broker admin SUBCOMMAND --help' for one subcommand

Exit codes:
  0  done
  1  the broker answered with an error (its problem code and detail go to stderr),
     or could not be reached
  2  bad usage: unknown subcommand or flag, missing or invalid argument (nothing was sent)
  3  refused: the admin token is wrong, or the call is forbidden (HTTP 401/403), or too many
     failed authentications from this address (HTTP 429 rate_limited)
`;

function commandUsage(c: AdminCommand): string {
  return `Usage: join-broker admin ${c.synopsis} --cluster NAME [--broker URL] [--admin-token TOKEN] [--json]\n\n${c.summary}.\n${c.details ? `${c.details}\n` : ""}\nRun 'join-broker admin --help' for the connection flags and exit codes.\n`;
}

/** What to say about positionals that name no subcommand: the closest ones, whatever was mistyped. */
function unknownSubcommand(positionals: string[]): string {
  const names = COMMANDS.map((c) => c.words.join(" "));
  const two = positionals.slice(0, 2).join(" ");
  const typed = positionals.length > 1 && closest(two, names).length ? two : positionals[0];
  const near = closest(typed, names);
  const group = names.filter((n) => n.startsWith(`${positionals[0]} `));
  const options = near.length ? near : group;
  const hint = options.length ? `; did you mean ${options.map((n) => `'${n}'`).join(" or ")}?` : "; 'join-broker admin --help' lists them";
  return `unknown subcommand '${typed}'${hint}`;
}

/** The subcommand named by the leading positionals: "token create" takes two words, "status" one. */
function findCommand(positionals: string[]): { command: AdminCommand; args: string[] } | null {
  for (const c of COMMANDS) {
    if (c.words.every((w, i) => positionals[i] === w)) return { command: c, args: positionals.slice(c.words.length) };
  }
  return null;
}

function typedOnly(values: Values, fromEnv: Set<string>): Values {
  return Object.fromEntries(Object.entries(values).filter(([flag]) => !fromEnv.has(flag)));
}

/** The flag, the file, then JOIN_BROKER_ADMIN_TOKEN. */
function adminToken(values: Values, fromEnv: Set<string>): string | undefined {
  const token = values["admin-token"];
  if (typeof token === "string" && !fromEnv.has("admin-token")) return token;
  const file = values["admin-token-file"];
  if (typeof file === "string") {
    try {
      return readFileSync(file, "utf8").trim();
    } catch (e) {
      throw new UsageError(`cannot read --admin-token-file ${file}: ${(e as Error).message}`);
    }
  }
  return (token as string | undefined) || undefined;
}

export interface Io {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  env: NodeJS.ProcessEnv;
}

const processIo: Io = { stdout: (t) => process.stdout.write(t), stderr: (t) => process.stderr.write(t), env: process.env };

export async function run(argv: string[], io: Io = processIo): Promise<number> {
  const parsed = parseCommand(defineCommand("admin", ADMIN_FLAGS, { positionals: true }), argv, io.env);
  const values = parsed.values;
  const found = findCommand(parsed.positionals);

  if (parsed.help) {
    io.stdout(found ? commandUsage(found.command) : ADMIN_USAGE);
    return EXIT.ok;
  }
  if (parsed.positionals.length === 0) {
    io.stderr(ADMIN_USAGE);
    return EXIT.usage;
  }
  if (!found) throw new UsageError(unknownSubcommand(parsed.positionals));
  const { command, args } = found;
  const name = command.words.join(" ");
  if (args.length < command.args.length) throw new UsageError(`'${name}' needs ${command.args.slice(args.length).join(" ")}: join-broker admin ${command.synopsis}`);
  if (args.length > command.args.length) throw new UsageError(`'${name}' takes ${command.args.length ? command.args.join(" ") : "no arguments"}, not ${JSON.stringify(args.slice(command.args.length).join(" "))}`);
  for (const flag of Object.keys(COMMAND_FLAGS)) {
    if (values[flag] !== undefined && !command.options.includes(flag)) throw new UsageError(`--${flag} does not apply to '${name}'`);
  }

  const cluster = values.cluster as string | undefined;
  const broker = values.broker as string | undefined;
  const token = adminToken(values, parsed.fromEnv);
  if (!cluster && command.perCluster !== false) throw new UsageError("--cluster NAME is required (or JOIN_BROKER_CLUSTER)");
  if (!broker) throw new UsageError("--broker URL is required (or JOIN_BROKER_URL)");
  if (!token) throw new UsageError("--admin-token TOKEN is required (or JOIN_BROKER_ADMIN_TOKEN, or --admin-token-file PATH)");
  const timeoutText = values["timeout-seconds"] as string | undefined;
  if (timeoutText !== undefined && !/^[1-9]\d*$/.test(timeoutText)) throw new UsageError("--timeout-seconds must be a whole number of seconds, at least 1");

  const json = values.json === true;
  // Only a follower waits for an interrupt; every other subcommand dies of it the ordinary way.
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  if (values.follow) {
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
  }
  try {
    let brokerClient;
    let client: AdminClient | undefined;
    try {
      brokerClient = new BrokerClient({ baseUrl: broker, bearer: token, timeoutMs: timeoutText ? Number(timeoutText) * 1000 : undefined, userAgent: "join-broker-admin/1" });
      client = cluster ? brokerClient.admin(cluster) : undefined;
    } catch (e) {
      throw new UsageError(e instanceof InvalidInput ? `--${e.message}` : `--broker: ${(e as Error).message}`);
    }
    await command.run({
      // Commands that are not about one cluster (perCluster: false) never read it.
      client: client as AdminClient,
      broker: brokerClient,
      args,
      // What was typed: a subcommand that reads --cluster itself (credentials create) never takes JOIN_BROKER_CLUSTER.
      values: typedOnly(values, parsed.fromEnv),
      signal: stop.signal,
      note: (text) => io.stderr(`join-broker admin ${name}: ${text}\n`),
      print: (reply: Reply<unknown>, human: () => string) => io.stdout(json ? `${reply.text.trimEnd()}\n` : human()),
    });
    return EXIT.ok;
  } catch (e) {
    if (e instanceof InvalidInput) throw new UsageError(inFlagTerms(e, values));
    if (e instanceof BrokerProblem) {
      if (json) io.stdout(`${e.text.trimEnd()}\n`);
      io.stderr(`join-broker admin ${name}: the broker refused: ${e.code} (HTTP ${e.status}): ${e.problem.detail}${hint(e, cluster ?? "", name)}\n`);
      // rate_limited answers only failed authentications: it is a refusal like the 401s before it.
      return e.refused || e.code === "rate_limited" ? EXIT.refused : EXIT.failure;
    }
    if (e instanceof BrokerUnreachable) {
      io.stderr(`join-broker admin ${name}: ${e.message}\n`);
      return EXIT.failure;
    }
    throw e;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

/** Request fields as the flags (or arguments) that set them, and the unit a bound is in. */
const FIELD_FLAGS: Record<string, { flag: string; unit?: string }> = {
  ttlSeconds: { flag: "--ttl", unit: "s" },
  maxUses: { flag: "--max-uses" },
  description: { flag: "--description", unit: "characters" },
  reason: { flag: "--reason", unit: "characters" },
  state: { flag: "--state" },
  limit: { flag: "--limit" },
  after: { flag: "--after" },
  maxInFlight: { flag: "--max-in-flight" },
  leaseSeconds: { flag: "--lease-seconds", unit: "s" },
  admissionTtlSeconds: { flag: "--admission-ttl-seconds", unit: "s" },
  maxQueue: { flag: "--max-queue" },
  members: { flag: "--member" },
  nodes: { flag: "--nodes" },
  peerHosts: { flag: "--peer-hosts" },
};

/** A refused input, said in the words the user typed: the flag, its value, and the rule. */
function inFlagTerms(e: InvalidInput, values: Values): string {
  if (e.issues.length === 0) return e.message;
  return e.issues
    .map((i) => {
      const field = i.path.split(".")[0];
      const known = FIELD_FLAGS[field];
      if (!known) return i.path ? `${i.path}: ${i.message}` : i.message;
      const typed = values[known.flag.slice(2)];
      const given = typeof typed === "string" ? ` ${typed}` : "";
      const unit = known.unit ? ` ${known.unit}` : "";
      const rule =
        i.code === "too_small" && i.minimum !== undefined ? `must be at least ${i.minimum}${unit}`
        : i.code === "too_big" && i.maximum !== undefined ? `must be at most ${i.maximum}${unit}`
        : i.message.charAt(0).toLowerCase() + i.message.slice(1);
      return `${known.flag}${given}: ${rule}`;
    })
    .join("; ");
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
