/**
 * Typed flag values, each worded once: a reader turns the text given (on the command line or in
 * the flag's environment variable) into its value, or refuses it (UsageError) naming the flag.
 * Commands declare their options with them; commander calls them as it parses.
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { isIP } from "node:net";
import { isAbsolute, resolve } from "node:path";
import { Option, type Command } from "commander";
import { BEARER_TOKEN_CHARACTERS, isBearerToken } from "../../shared/protocol/bearer.ts";
import { canonicalPeerUrl, isClusterName, isNodeName, peerUrlProblem, reservedNodeNameProblem } from "../../shared/protocol/identifiers.ts";
import { parseEndpoints } from "../etcd/gateway.ts";
import { UsageError } from "../exit-codes.ts";
import { parseDuration } from "./format.ts";

/** Turns a flag's text into its value; `previous` is what the flag held before (a repeated flag's list). */
export type Reader<T> = (text: string, flag: string, previous: T | undefined) => T;

/** The text last given to each option, as typed: refusals made later name it so. */
const TYPED = new WeakMap<Option, string>();

/** A flag with a value read by `read`; a blank value is no value (an empty JOIN_BROKER_URL is unset: see CliCommand). */
export function value<T>(flags: string, description: string, read: Reader<T>): Option {
  const option = new Option(flags, description);
  return option.argParser((text: string, previous: T | undefined) => {
    const trimmed = text.trim();
    if (trimmed === "") return undefined;
    TYPED.set(option, trimmed);
    return read(trimmed, option.long!, previous);
  });
}

/** The text given to `option` (the last one of a repeated flag), before it was read. */
export function givenText(option: Option): string | undefined {
  return TYPED.get(option);
}

/** One of a few words: the help lists them (commander's `.choices()`), the reader words a refusal. */
export function choice(flags: string, description: string, choices: readonly string[]): Option {
  const option = value(flags, description, (text, flag) => {
    if (!choices.includes(text))
      throw new UsageError(`${flag} must be ${choices.length === 2 ? choices.join(" or ") : `one of ${choices.join(", ")}`}, not ${JSON.stringify(text)}`);
    return text;
  });
  const read = option.parseArg!;
  return option.choices(choices).argParser(read);
}

export const text: Reader<string> = (t) => t;

/** A path, made absolute against the working directory. */
export const path: Reader<string> = (t) => resolve(t);

/** A file that must exist now. */
export const existingFile: Reader<string> = (t, flag) => {
  if (!existsSync(t)) throw new UsageError(`${flag} ${t}: no such file`);
  return resolve(t);
};

/** An executable: a bare name is looked up on PATH when it runs, a path made absolute. */
export const program: Reader<string> = (t) => (isAbsolute(t) || !t.includes("/") ? t : resolve(t));

/** An absolute http(s) URL, without trailing slashes. */
export const httpUrl: Reader<string> = (t, flag) => {
  let url: URL;
  try {
    url = new URL(t);
  } catch {
    throw new UsageError(`${flag} ${JSON.stringify(t)} is not an absolute URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError(`${flag} must be an http or https URL`);
  return t.replace(/\/+$/, "");
};

/** An http(s) origin: scheme, host and port, nothing after. */
export const origin: Reader<string> = (t, flag) => {
  const url = httpUrl(t, flag, undefined);
  if (new URL(url).origin !== url) throw new UsageError(`${flag} must be an origin like https://broker.example.com, not ${JSON.stringify(t)}`);
  return url;
};

/** An etcd peer or client URL, parsed as strictly as the broker and the join API do, in its canonical form. */
export const peerUrl: Reader<string> = (t, flag) => {
  const why = peerUrlProblem(t);
  if (why) throw new UsageError(`${flag} ${JSON.stringify(t)} ${why}`);
  return canonicalPeerUrl(t);
};

export const clusterName: Reader<string> = (t, flag) => {
  if (!isClusterName(t)) throw new UsageError(`${flag} ${JSON.stringify(t)} is not a valid cluster name (a DNS label: a-z, 0-9, '-')`);
  return t;
};

export const nodeName: Reader<string> = (t, flag) => {
  if (!isNodeName(t)) throw new UsageError(`${flag} ${JSON.stringify(t)} is not a valid node name (letters, digits, '.', '_', '-'; at most 63)`);
  return t;
};

/**
 * The name a node joins under (its etcd member name and its certificates' common name, which etcd
 * takes as the user): a node name that is none of the reserved ones (root, kube-apiserver, …).
 */
export const ownNodeName: Reader<string> = (t, flag, previous) => {
  const name = nodeName(t, flag, previous);
  const reserved = reservedNodeNameProblem(name);
  if (reserved) throw new UsageError(`${flag}: ${reserved}`);
  return name;
};

/** A DNS name (labels of letters, digits and '-', dot-separated), which a certificate's SAN can name (as it can an IP address). */
const DNS_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** A name a server certificate can carry: a DNS name or an IP address (TLS's server name). */
export const serverName: Reader<string> = (t, flag) => {
  if (!DNS_NAME.test(t) && !isIP(t)) throw new UsageError(`${flag} ${JSON.stringify(t)} is not a DNS name or an IP address`);
  return t;
};

/** etcd client URLs, comma-separated (`URL[,URL…]`). */
export const endpoints: Reader<string[]> = (t, flag) => {
  try {
    return parseEndpoints(t);
  } catch (e) {
    throw new UsageError(`${flag} ${JSON.stringify(t)}: ${(e as Error).message}`);
  }
};

/**
 * A number within bounds: `number({ min: 1, max: 300, unit: "seconds" })`. `whole` refuses a
 * fraction; `note` says what a special value means ("0: no limit").
 */
export function number({
  min = 0,
  max,
  whole = false,
  unit,
  note,
}: {
  min?: number;
  max?: number;
  whole?: boolean;
  unit?: string;
  note?: string;
}): Reader<number> {
  return (t, flag) => {
    const n = Number(t);
    if (!Number.isFinite(n) || n < min || (max !== undefined && n > max) || (whole && !/^\d+$/.test(t))) {
      const kind = `${whole ? "a whole number" : "a number"}${unit ? ` of ${unit}` : ""}`;
      const range = max !== undefined ? ` from ${min} to ${max}` : min > 0 ? `, at least ${min}` : "";
      throw new UsageError(`${flag} must be ${kind}${range}${note ? ` (${note})` : ""}, not ${JSON.stringify(t)}`);
    }
    return n;
  };
}

/** A lifetime in seconds, or "never" as a choice made out loud. */
export const lifetime: Reader<number | "never"> = (t, flag) => {
  if (t === "never") return "never";
  const seconds = parseDuration(t);
  if (seconds === null) throw new UsageError(`${flag} must be seconds, a duration like 10m, 24h, 7d, or 'never', not ${JSON.stringify(t)}`);
  return seconds;
};

/** `HOST:PORT` (an IPv6 host in brackets), for every command that serves. */
export const listen: Reader<{ host: string; port: number }> = (t, flag) => {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(t);
  if (!m) throw new UsageError(`${flag} ${JSON.stringify(t)} is not HOST:PORT (an IPv6 host goes in brackets: [::1]:8443)`);
  const host = m[1] ?? m[2];
  const port = Number(m[3]);
  if (port > 65535) throw new UsageError(`${flag} port ${port} is out of range`);
  if (m[1] && isIP(host) !== 6) throw new UsageError(`${flag} [${host}] is not an IPv6 address`);
  return { host, port };
};

/** Whether a listen address is loopback only. */
export function isLoopback(host: string): boolean {
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  if (isIP(host) === 6) return host === "::1" || host === "0:0:0:0:0:0:0:1";
  return false;
}

/** A flag that may be given again: every value, each read by `read`. */
export function repeated<T>(read: Reader<T>): Reader<T[]> {
  return (t, flag, previous) => [...(previous ?? []), read(t, flag, undefined)];
}

/** A comma-separated list, repeatable, without empty entries. */
export const list: Reader<string[]> = (t, flag, previous) => {
  const items = t.split(",").map((x) => x.trim());
  if (items.some((x) => x === "")) throw new UsageError(`${flag} takes a comma-separated list without empty entries`);
  return [...(previous ?? []), ...items];
};

/** A file's text, or a refusal naming the flag it was given to. */
export function readFlagFile(flag: string, file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (e) {
    throw new UsageError(`cannot read ${flag} ${file}: ${(e as Error).message}`);
  }
}

const PEM = {
  certificate: /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g,
  "private key": /-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----[\s\S]+?-----END (?:[A-Z]+ )?PRIVATE KEY-----/g,
} as const;

/** The PEM blocks of a kind in a file the flag names (at least one). */
export function pemBlocks(flag: string, file: string, kind: keyof typeof PEM): string[] {
  const blocks = readFlagFile(flag, file).match(PEM[kind]) ?? [];
  if (!blocks.length) throw new UsageError(`${flag} ${file} holds no PEM ${kind}`);
  return blocks.map((b) => `${b}\n`);
}

/** A file that holds a PEM certificate (chain). */
export const certificateFile: Reader<string> = (t, flag) => (pemBlocks(flag, t, "certificate"), t);
/** A file that holds a PEM private key. */
export const privateKeyFile: Reader<string> = (t, flag) => (pemBlocks(flag, t, "private key"), t);

/** A secret that no bearer header can carry is refused: the broker would refuse it on every request. */
export function bearerToken(what: string, token: string): string {
  if (!isBearerToken(token)) throw new UsageError(`${what} may use only ${BEARER_TOKEN_CHARACTERS}: requests carry it as an HTTP bearer token`);
  return token;
}

/**
 * A secret given one of three ways, in this order: its flag (`flag`: visible to other local
 * users, so the environment or a file is better), a file (`file`), then the flag's environment
 * variable. A typed flag and a file are refused together; undefined when none gives it.
 */
export function readSecret(cmd: Command, flag: string, file: string): string | undefined {
  const option = (name: string) => cmd.options.find((o) => o.attributeName() === name)!;
  const given = cmd.getOptionValue(flag) as string | undefined;
  const typed = given !== undefined && cmd.getOptionValueSource(flag) === "cli";
  const path = cmd.getOptionValue(file) as string | undefined;
  if (typed && path !== undefined) throw new UsageError(`${option(flag).long} does not go with ${option(file).long}: give either, not both`);
  if (typed || path === undefined) return given;
  const secret = readFlagFile(option(file).long!, path).trim();
  if (!secret) throw new UsageError(`${option(file).long} ${path} is empty`);
  return secret;
}
