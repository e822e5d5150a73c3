/**
 * The one command-line layer every `join-broker` command parses its flags with: a commander
 * `Command` built from a small option table, parsed without exiting the process, so that every
 * usage problem becomes a UsageError (exit 2) worded the same way for every command.
 * @module
 */
import { isIP } from "node:net";
import { Command, CommanderError, Option } from "commander";
import { UsageError } from "../exit-codes.ts";
import { didYouMean } from "./suggest.ts";

/**
 * One flag: the name of its value (`"URL"`), or `true` for a switch (`{ switch, short }` with a
 * one-letter alias); `env` falls back to that variable, `repeat` collects every value given.
 */
export type FlagSpec = string | true | { value: string; env?: string; repeat?: true } | { switch: true; short: string };

/** Flag values by the flag's own name (`"peer-url"`), as typed or from its environment variable. */
export type Values = Record<string, string | boolean | string[] | undefined>;

export interface Parsed {
  values: Values;
  /** The flags whose value came from their environment variable, not from the command line. */
  fromEnv: Set<string>;
  positionals: string[];
  help: boolean;
}

/** A command whose flags are `table`; `--help`/`-h` is answered by the caller with its own text. */
export function defineCommand(name: string, table: Record<string, FlagSpec>, { positionals = false } = {}): Command {
  const cmd = new Command(name)
    .exitOverride()
    .configureOutput({ writeOut: () => {}, writeErr: () => {} })
    .allowExcessArguments(true);
  if (positionals) cmd.argument("[args...]");
  for (const [flag, spec] of Object.entries(table)) cmd.addOption(option(flag, spec));
  return cmd;
}

function option(flag: string, spec: FlagSpec): Option {
  if (spec === true) return new Option(`--${flag}`);
  if (typeof spec === "string") return new Option(`--${flag} <${spec}>`);
  if ("switch" in spec) return new Option(`-${spec.short}, --${flag}`);
  const o = new Option(`--${flag} <${spec.value}>`);
  if (spec.env) o.env(spec.env);
  if (spec.repeat) o.argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]);
  return o;
}

/**
 * Parses `argv` with `cmd`, environment fallbacks read from `env`. Bad usage is a UsageError that
 * says what to type instead; a help flag anywhere wins over every other problem.
 */
export function parseCommand(cmd: Command, argv: string[], env: NodeJS.ProcessEnv = process.env): Parsed {
  ambiguousValue(cmd, argv);
  try {
    withEnv(env, () => cmd.parse(argv, { from: "user" }));
  } catch (e) {
    if (!(e instanceof CommanderError)) throw e;
    // The words typed besides flags say which help (`admin status --help`).
    if (e.code === "commander.helpDisplayed" || e.code === "commander.help") return { values: {}, fromEnv: new Set(), positionals: cmd.args.filter((a) => !a.startsWith("-")), help: true };
    throw usageError(cmd, e, argv);
  }
  const values: Values = {};
  const fromEnv = new Set<string>();
  for (const o of cmd.options) {
    const name = o.long!.slice(2);
    values[name] = cmd.getOptionValue(o.attributeName()) as Values[string];
    if (cmd.getOptionValueSource(o.attributeName()) === "env") fromEnv.add(name);
  }
  const positionals = cmd.registeredArguments.length ? ((cmd.processedArgs[0] as string[] | undefined) ?? []) : cmd.args;
  if (!cmd.registeredArguments.length && positionals.length) throw new UsageError(`unexpected positional argument '${positionals[0]}'`);
  return { values, fromEnv, positionals, help: false };
}

/** commander reads environment fallbacks from process.env: parse (synchronously) against the given one. */
function withEnv(env: NodeJS.ProcessEnv, parse: () => void): void {
  if (env === process.env) return parse();
  const saved = process.env;
  process.env = env;
  try {
    parse();
  } finally {
    process.env = saved;
  }
}

/**
 * commander's refusal in the project's words. An unknown flag is named with the known ones closest
 * to it by suggest.ts, which also suggests admin's two-word subcommands ('tokens list' → 'token
 * list') and across commands ('stauts' → 'admin status'), so every suggestion reads alike.
 */
function usageError(cmd: Command, e: CommanderError, argv: string[]): UsageError {
  switch (e.code) {
    case "commander.unknownOption": {
      const typed = (cmd.args.find((a) => a.startsWith("-") && a !== "-") ?? "").split("=")[0];
      if (knownFlags(cmd).includes(typed)) return new UsageError(`${typed} takes no value`);
      return new UsageError(`unknown flag '${typed}'${didYouMean(typed, knownFlags(cmd))}`);
    }
    case "commander.optionMissingArgument":
      return new UsageError(`${argv.at(-1)} needs a value`);
    default:
      return new UsageError(e.message.replace(/^error: /, ""));
  }
}

/** Every `--flag` a command knows. */
export function knownFlags(cmd: Command): string[] {
  return cmd.options.flatMap((o) => (o.long ? [o.long] : []));
}

/**
 * `--flag -x`: a value that starts with '-' given apart from its flag is more likely a forgotten
 * value than a value (as node:util parseArgs judged); `--flag=-x` says it is meant.
 */
function ambiguousValue(cmd: Command, argv: string[]): void {
  for (let i = 0; i < argv.length - 1; i++) {
    if (argv[i] === "--") return;
    const o = cmd.options.find((x) => x.long === argv[i] || (x.short !== undefined && x.short === argv[i]));
    if (!o || !o.required) continue;
    const next = argv[i + 1];
    if (next.length > 1 && next.startsWith("-")) throw new UsageError(`${o.long} ${next} is ambiguous: give ${o.long} a value, or write ${o.long}=${next} if that is the value`);
    i++;
  }
}

/** `--listen HOST:PORT` (an IPv6 host in brackets) into its parts: the one rule for every command that serves. */
export function parseListen(value: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(value);
  if (!m) throw new UsageError(`--listen ${JSON.stringify(value)} is not HOST:PORT (an IPv6 host goes in brackets: [::1]:8443)`);
  const host = m[1] ?? m[2];
  const port = Number(m[3]);
  if (port > 65535) throw new UsageError(`--listen port ${port} is out of range`);
  if (m[1] && isIP(host) !== 6) throw new UsageError(`--listen [${host}] is not an IPv6 address`);
  return { host, port };
}
