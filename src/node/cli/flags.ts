/**
 * The one command-line layer every `join-broker` command parses its flags with: `node:util`
 * `parseArgs`, strict, with an unknown flag named together with the known ones closest to it.
 * @module
 */
import { isIP } from "node:net";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { UsageError } from "../exit-codes.ts";
import { didYouMean } from "./suggest.ts";

type Options = NonNullable<ParseArgsConfig["options"]>;

/** Parses `argv` against `options`; bad usage is a UsageError that says what to type instead. */
export function parseFlags<O extends Options>(argv: string[], options: O, { allowPositionals = false } = {}) {
  const unknown = unknownFlag(argv, options);
  if (unknown) {
    const known = Object.keys(options).map((f) => `--${f}`);
    throw new UsageError(`unknown flag '${unknown}'${didYouMean(unknown, known)}`);
  }
  try {
    return parseArgs({ args: argv, options, allowPositionals, strict: true });
  } catch (e) {
    if (isParseArgsError(e)) throw new UsageError(e.message.replace(/\. To specify a positional argument.*$/s, ""));
    throw e;
  }
}

/** The first `--flag` that `options` does not know (a string flag's value is skipped, never judged). */
function unknownFlag(argv: string[], options: Options): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--") return undefined;
    if (!arg.startsWith("--")) continue;
    const name = arg.slice(2).split("=")[0];
    const option = options[name];
    if (!option) return `--${name}`;
    if (option.type === "string" && !arg.includes("=")) i++;
  }
  return undefined;
}

function isParseArgsError(e: unknown): e is Error & { code: string } {
  const code: unknown = e instanceof TypeError ? (e as unknown as { code?: unknown }).code : undefined;
  return typeof code === "string" && code.startsWith("ERR_PARSE_ARGS");
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
