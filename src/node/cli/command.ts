/**
 * The one command-line layer: every `join-broker` command is a CliCommand. commander parses
 * (options and their readers, choices, environment fallbacks, conflicts, arguments,
 * subcommands); this class only keeps it from exiting the process, words its refusals the
 * project's way (a UsageError: exit 2, with the closest known names from suggest.ts), and lays
 * out help like the docs' flag tables (`--broker URL`).
 * @module
 */
import { Command, CommanderError, Help, type Option, type HelpContext, type OptionValueSource, type ParseOptions } from "commander";
import { UsageError } from "../exit-codes.ts";
import { closest, didYouMean } from "./suggest.ts";

/** commander's codes for a help or version that was printed: exit 0. */
export const PRINTED = new Set(["commander.helpDisplayed", "commander.version"]);

export class CliCommand extends Command {
  /** The command line as given (see `commandLine`). */
  #argv: string[] = [];

  constructor(name?: string) {
    super(name);
    this.exitOverride()
      // Refusals are written by the caller (main.ts), once, in the project's words.
      .configureOutput({
        writeErr: () => {},
        outputError: () => {},
        // A terminal's width, else as wide as the docs' own help texts.
        getOutHelpWidth: () => (process.stdout.isTTY ? process.stdout.columns : 100),
        getErrHelpWidth: () => (process.stderr.isTTY ? process.stderr.columns : 100),
      })
      .showSuggestionAfterError(false)
      // `join-broker help COMMAND…` is main.ts's own: no `help` subcommand in every group.
      .helpCommand(false)
      .helpOption("-h, --help", "this help")
      .configureHelp({ optionTerm, subcommandTerm, formatItem, sortSubcommands: false });
  }

  override createCommand(name?: string): CliCommand {
    return new CliCommand(name);
  }

  /** Every refusal of commander's parsing comes through here: it becomes a UsageError in the project's words. */
  override error(message: string, options?: { code?: string; exitCode?: number }): never {
    throw refusal(this, options?.code ?? "commander.error", message);
  }

  /** A group of subcommands named without one: the subcommands it has, as bad usage. */
  override help(context?: HelpContext): never;
  /** @deprecated commander's own overload, kept for its type. */
  override help(cb: (str: string) => string): never;
  override help(context?: HelpContext | ((str: string) => string)): never {
    if (typeof context === "object" && context.error) throw refusal(this, "commander.help", "");
    return super.help(context as HelpContext);
  }

  /**
   * Help wins over every other problem, as commander's own check would a moment later, but before
   * any value is read: `join --cluster Bad! --help` is help, and so is a bad environment value.
   * A command whose arguments begin with a subcommand leaves the question to that subcommand; a
   * group deeper down (admin's `token`) is given only what follows its subcommand's name, so it
   * leaves it to commander, which asks the subcommand.
   */
  override parseOptions(args: string[]): { operands: string[]; unknown: string[] } {
    const end = args.indexOf("--");
    const before = end === -1 ? args : args.slice(0, end);
    const sees = this.commands.length === 0 || !this.parent?.parent;
    if (sees && !this.commands.some((c) => c.name() === args[0]) && before.some((a) => a === "-h" || a === "--help")) {
      this.outputHelp();
      throw new CommanderError(0, "commander.helpDisplayed", "(outputHelp)");
    }
    return super.parseOptions(args);
  }

  /**
   * A blank value is no value: an empty JOIN_BROKER_URL is unset, and `--data-dir ""` leaves the
   * default. (values.ts's readers answer a blank with nothing, which commander stores as "".)
   */
  override setOptionValueWithSource(key: string, value: unknown, source: OptionValueSource): this {
    return value === "" ? this : super.setOptionValueWithSource(key, value, source);
  }

  override async parseAsync(argv?: readonly string[], options?: ParseOptions): Promise<this> {
    this.#argv = [...(argv ?? [])];
    return super.parseAsync(argv, options);
  }

  /** The command line as given to the program (to run it again: ca-file.ts). */
  commandLine(): string[] {
    let root: Command = this;
    while (root.parent) root = root.parent;
    return root instanceof CliCommand ? root.#argv : [];
  }

  /** The exit code of the command's work, once it ran: what main.ts returns. */
  exitCode: number | undefined;

  /** The command's work, resolving with its exit code. */
  runs(work: (cmd: this) => Promise<number>): this {
    return this.action(async () => {
      this.exitCode = await work(this);
    });
  }

  /** The command's words below `join-broker`: ["admin", "token", "create"]. */
  path(): string[] {
    const words: string[] = [];
    for (let c: Command | null = this; c?.parent; c = c.parent) words.unshift(c.name());
    return words;
  }
}

/** `--broker URL`, as the docs write it, rather than commander's `--broker <URL>`. */
function optionTerm(option: Option): string {
  return option.flags.replace(/ <([^>]+)>/, " $1").replace(/ \[([^\]]+)\]/, " [$1]");
}

/** A command by its name; below one (admin's `token create [--ttl DURATION] …`) by its words and synopsis. */
function subcommandTerm(cmd: Command): string {
  if (!cmd.parent?.parent) return cmd.name();
  const words: string[] = [];
  for (let c: Command | null = cmd; c?.parent?.parent; c = c.parent) words.unshift(c.name());
  // commander's own usage ("[options] [command]") says nothing a synopsis would.
  const usage = cmd
    .usage()
    .replace(/^\[options\]/, "")
    .replace(/\[command\]$/, "")
    .trim();
  return [...words, usage].filter(Boolean).join(" ");
}

/** A term too long for the column gets its description on the lines below it. */
function formatItem(term: string, termWidth: number, description: string, helper: Help): string {
  const width = Math.min(termWidth, 32);
  if (term.length <= width || !description) return Help.prototype.formatItem.call(helper, term, width, description, helper);
  const indent = " ".repeat(helper.helpWidth !== undefined && helper.helpWidth < 60 ? 4 : 6);
  return `  ${term}\n${helper.boxWrap(description, (helper.helpWidth ?? 80) - indent.length).replace(/^/gm, indent)}`;
}

/** Every `--flag` a command takes: its own, and those of parents that read theirs after a subcommand too (admin's connection flags). */
export function knownFlags(cmd: Command): string[] {
  const flags: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) {
    for (const o of c.options) if (o.long && !flags.includes(o.long)) flags.push(o.long);
    // As commander reads them: a parent with positional options (`join-broker`, serve) stops at its subcommand.
    if (!c.parent || (c.parent as unknown as { _enablePositionalOptions: boolean })._enablePositionalOptions) break;
  }
  return flags;
}

/** The commands under `cmd` that do something, by their words below it ("token create"), a group's in its place. */
export function leafCommands(cmd: Command, prefix: string[] = []): { words: string[]; command: Command }[] {
  return cmd.commands.flatMap((c) => {
    const words = [...prefix, c.name()];
    const below = leafCommands(c, words);
    // A command with its own action and subcommands (admin's `policy`, `policy set`) is both.
    return hasAction(c) ? [{ words, command: c }, ...below] : below;
  });
}

/** Whether the command does something itself (a group of subcommands does not). */
function hasAction(c: Command): boolean {
  return (c as unknown as { _actionHandler: unknown })._actionHandler != null;
}

/** The top of `cmd`'s family: the command right below `join-broker`. */
function family(cmd: Command): Command {
  let c = cmd;
  while (c.parent?.parent) c = c.parent;
  return c;
}

/** The options of a command that commander's message names, in the order it names them (`'--exec <COMMAND>'`). */
function optionsNamedIn(cmd: Command, message: string): Option[] {
  const named = cmd.options
    .map((o) => ({ o, at: Math.max(message.indexOf(`'${o.flags}'`), o.envVar ? message.indexOf(`'${o.envVar}'`) : -1) }))
    .filter((x) => x.at !== -1);
  return named.sort((a, b) => a.at - b.at).map((x) => x.o);
}

/** Why two options do not go together, said where they are declared (see `conflicting`). */
const REASONS = new WeakMap<Option, Map<string, string>>();

/** commander's `.conflicts()`, with the reason the refusal gives. */
export function conflicting(option: Option, others: string[], reason: string): Option {
  const reasons = REASONS.get(option) ?? new Map<string, string>();
  for (const other of others) reasons.set(other, reason);
  REASONS.set(option, reasons);
  return option.conflicts(others);
}

/** A command made of subcommands, given none: its help (on stderr, as bad usage). */
export class NoSubcommand extends UsageError {
  constructor(readonly help: string) {
    super("no subcommand given");
  }
}

/** Words such as "unknown flag '--clster'; did you mean '--cluster'?" for what commander refused. */
function refusal(cmd: CliCommand, code: string, message: string): UsageError {
  const words = cmd.path();
  const name = words.slice(1).join(" ") || words[0];
  switch (code) {
    case "commander.unknownOption": {
      const typed = (cmd.args.find((a) => a.startsWith("-") && a !== "-") ?? message.match(/'([^']+)'/)?.[1] ?? "").split("=")[0];
      const here = knownFlags(cmd);
      if (here.includes(typed)) return new UsageError(`${typed} takes no value`);
      // A flag of another subcommand of the same command: say where it does apply.
      const top = family(cmd);
      const owners = [...(hasAction(top) ? [{ words: [top.name()], command: top }] : []), ...leafCommands(top)].filter((l) =>
        knownFlags(l.command).includes(typed),
      );
      if (owners.length && cmd === family(cmd))
        return new UsageError(`${typed} goes after its subcommand: ${owners.map((l) => `'${l.words.join(" ")}'`).join(", ")}`);
      if (owners.length) return new UsageError(`${typed} does not apply to '${name}'`);
      return new UsageError(`unknown flag '${typed}'${didYouMean(typed, here)}`);
    }
    case "commander.optionMissingArgument":
      return new UsageError(`${optionsNamedIn(cmd, message)[0]?.long ?? message} needs a value`);
    case "commander.conflictingOption": {
      const [a, b] = optionsNamedIn(cmd, message);
      const reason = REASONS.get(a)?.get(b.attributeName()) ?? REASONS.get(b)?.get(a.attributeName());
      const given = (o: Option) => (cmd.getOptionValueSource(o.attributeName()) === "env" ? o.envVar! : o.long!);
      return new UsageError(`${given(a)} does not go with ${given(b)}${reason ? `: ${reason}` : ""}`);
    }
    case "commander.excessArguments": {
      // A command with subcommands and an action of its own (admin's `policy`): a mistyped subcommand.
      if (cmd.commands.length) return unknownSubcommand(cmd, cmd.args);
      const extra = cmd.args.slice(cmd.registeredArguments.length);
      const takes = cmd.registeredArguments.length ? cmd.registeredArguments.map((a) => a.name().toUpperCase()).join(" ") : "no arguments";
      return new UsageError(`'${name}' takes ${takes}, not ${JSON.stringify(extra.join(" "))}`);
    }
    case "commander.missingArgument": {
      const missing = cmd.registeredArguments.slice(cmd.args.length).map((a) => a.name().toUpperCase());
      return new UsageError(`'${name}' needs ${missing.join(" ")}: join-broker ${words.join(" ")} ${cmd.usage()}`);
    }
    case "commander.help":
      // The command alone (`join-broker admin`): its help says what it takes.
      if (cmd === family(cmd) && cmd.args.length === 0) return new NoSubcommand(cmd.helpInformation());
      return unknownSubcommand(cmd, cmd.args);
    case "commander.unknownCommand":
      return unknownSubcommand(cmd, cmd.args);
    default:
      return new UsageError(message.replace(/^error: /, ""));
  }
}

/**
 * Words that name no subcommand: the closest ones, whatever was mistyped ('tokens list' → 'token
 * list', 'token' → its three), reaching across the whole command (admin's two-word subcommands).
 */
function unknownSubcommand(cmd: CliCommand, args: string[]): UsageError {
  const top = family(cmd);
  const above = cmd.path().slice(1);
  const typedWords = [...above, ...args.filter((a) => !a.startsWith("-"))];
  const names = leafCommands(top).map((l) => l.words.join(" "));
  const two = typedWords.slice(0, 2).join(" ");
  const typed = typedWords.length > 1 && closest(two, names).length ? two : (typedWords[0] ?? "");
  const near = closest(typed, names);
  const group = names.filter((n) => n.startsWith(`${typedWords[0]} `));
  const options = near.length ? near : group;
  const hint = options.length ? `; did you mean ${options.map((n) => `'${n}'`).join(" or ")}?` : `; 'join-broker ${top.name()} --help' lists them`;
  return new UsageError(`unknown subcommand '${typed}'${hint}`);
}

/** How a missing flag is named: `--broker URL`, and how else it may be given (`or JOIN_BROKER_URL`). */
export interface Requirement {
  term: string;
  alternatives?: string;
}

export function requirementOf(option: Option): Requirement {
  return { term: optionTerm(option), alternatives: option.envVar && `or ${option.envVar}` };
}

/** A secret (see values.ts, `readSecret`): `an enrollment token (--token, --token-file or JOIN_BROKER_TOKEN)`. */
export function secretRequirement(cmd: Command, what: string, flag: string, file: string): Requirement {
  const option = (name: string) => cmd.options.find((o) => o.attributeName() === name)!;
  return { term: what, alternatives: [`${option(flag).long}, ${option(file).long}`, option(flag).envVar].filter(Boolean).join(" or ") };
}

/**
 * Every requirement not met, in one refusal ("--peer-url URL and --state-dir DIR are required"),
 * rather than one per run.
 */
export function requireAll(missing: Requirement[]): void {
  const or = (m: Requirement) => (m.alternatives ? ` (${m.alternatives})` : "");
  if (missing.length === 1) throw new UsageError(`${missing[0].term} is required${or(missing[0])}`);
  const named = missing.map((m) => `${m.term}${or(m)}`);
  if (missing.length > 1) throw new UsageError(`${named.slice(0, -1).join(", ")} and ${named.at(-1)} are required`);
}

/** The option of `cmd` named by attribute, as a requirement. */
export function requirement(cmd: Command, name: string): Requirement {
  return requirementOf(cmd.options.find((o) => o.attributeName() === name)!);
}

/** The options of `cmd` named by attribute that have no value: what `requireAll` refuses. */
export function unset(cmd: Command, ...names: string[]): Requirement[] {
  return names.filter((n) => cmd.getOptionValue(n) === undefined).map((n) => requirement(cmd, n));
}

/** Two flags that only make sense together ("--tls-cert and --tls-key go together"). */
export function together(cmd: Command, a: string, b: string): void {
  if ((cmd.getOptionValue(a) === undefined) !== (cmd.getOptionValue(b) === undefined)) {
    const flag = (n: string) => cmd.options.find((o) => o.attributeName() === n)!.long;
    throw new UsageError(`${flag(a)} and ${flag(b)} go together`);
  }
}

/** Whether the value came from the command line itself (not from its environment variable or default). */
export function typed(cmd: Command, name: string): boolean {
  return cmd.getOptionValueSource(name) === "cli";
}

/**
 * A command line read by the command `define` makes, without running it: the (sub)command it
 * names, parsed, or null when it asks for help. For checks of a command line (the tests, the docs'
 * and the systemd units' examples). `env` stands in for the environment while commander reads it.
 */
export function parseOnly(name: string, define: (cmd: CliCommand) => CliCommand, argv: string[], env: NodeJS.ProcessEnv = process.env): CliCommand | null {
  // As main.ts's program has it: the command under `join-broker`.
  const root = new CliCommand("join-broker").enablePositionalOptions();
  root.configureOutput({ ...root.configureOutput(), writeOut: () => {} });
  define(root.command(name) as CliCommand);
  let named: CliCommand | null = null;
  const quiet = (c: Command) => {
    if (hasAction(c)) {
      c.action(() => {
        named = c as CliCommand;
      });
    }
    c.commands.forEach(quiet);
  };
  root.commands.forEach(quiet);
  const saved = process.env;
  process.env = env;
  try {
    root.parse([name, ...argv], { from: "user" });
  } catch (e) {
    if (e instanceof CommanderError && PRINTED.has(e.code)) return null;
    throw e;
  } finally {
    process.env = saved;
  }
  return named;
}
