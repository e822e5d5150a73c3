/**
 * Every flag of the `join-broker admin` subcommands, once: how it is written, what it means, how
 * its value is read, and the request field it sets (so that a refusal of that field names the
 * flag as typed: `--ttl 30s: must be at least 60 s`). Each subcommand lists the ones it takes.
 * @module
 */
import type { Command } from "commander";
import type { InvalidInput } from "../../shared/client/index.ts";
import { TicketListQuery } from "../../shared/protocol/schemas.ts";
import { UsageError } from "../exit-codes.ts";
import { givenText, lifetime, list, number, repeated, text, type Reader } from "./values.ts";

/** One flag of the admin subcommands: `flags` as commander takes them, and the request field it sets (named in refusals). */
export interface AdminFlag {
  flags: string;
  description: string;
  /** How its value is read (each flag its own type); none: a switch. */
  read?(text: string, flag: string, previous: undefined): unknown;
  choices?: readonly string[];
  /** The request field it sets, and the unit the broker's bounds on it are in. */
  field?: string;
  unit?: string;
}

const whole = number({ whole: true });

/** A member of an existing cluster: NODE=PEERURL. */
const member: Reader<{ node: string; peerURL: string }> = (t, flag) => {
  const at = t.indexOf("=");
  if (at <= 0 || at === t.length - 1) throw new UsageError(`${flag} must be NODE=PEERURL, not ${JSON.stringify(t)}`);
  return { node: t.slice(0, at), peerURL: t.slice(at + 1) };
};

/** Every flag of every subcommand, once (by commander's attribute name). */
export const ADMIN_FLAGS = {
  ttl: {
    flags: "--ttl <DURATION>",
    description: "seconds or a duration such as 10m, 24h, 7d (at least 60 s), or 'never' (default: 24h)",
    read: lifetime,
    field: "ttlSeconds",
    unit: "s",
  },
  maxUses: {
    flags: "--max-uses <N>",
    description: "how many tickets it may create (default: any number until it expires): give the number of nodes",
    read: whole,
    field: "maxUses",
  },
  description: { flags: "--description <TEXT>", description: "what it is for", read: text, field: "description", unit: "characters" },
  nodes: {
    flags: "--nodes <PATTERNS>",
    description: "the node names it may ask tickets for: glob patterns (* and ?), comma-separated, repeatable",
    read: list,
    field: "nodes",
  },
  peerHosts: {
    flags: "--peer-hosts <HOSTS>",
    description: "the hosts of their peer URLs: host names, *.domain, IP addresses or CIDRs, comma-separated, repeatable",
    read: list,
    field: "peerHosts",
  },
  newCluster: { flags: "--new-cluster", description: "create the cluster if the broker does not have it yet" },
  readOnly: { flags: "--read-only", description: "a read-only credential (the only kind)" },
  state: { flags: "--state <STATE>", description: "only tickets in this state", choices: TicketListQuery.shape.state.unwrap().options, field: "state" },
  limit: { flags: "--limit <N>", description: "at most N entries", read: whole, field: "limit" },
  after: { flags: "--after <SEQ>", description: "only entries after this sequence number", read: whole, field: "after" },
  reason: { flags: "--reason <TEXT>", description: "why, for the audit log", read: text, field: "reason", unit: "characters" },
  maxInFlight: { flags: "--max-in-flight <N>", description: "nodes admitted at once", read: whole, field: "maxInFlight" },
  leaseSeconds: {
    flags: "--lease-seconds <N>",
    description: "an admitted node must heartbeat or complete within this",
    read: whole,
    field: "leaseSeconds",
    unit: "s",
  },
  admissionTtlSeconds: {
    flags: "--admission-ttl-seconds <N>",
    description: "lifetime of an admission token",
    read: whole,
    field: "admissionTtlSeconds",
    unit: "s",
  },
  maxQueue: { flags: "--max-queue <N>", description: "live tickets at most", read: whole, field: "maxQueue" },
  member: { flags: "--member <NODE=PEERURL>", description: "a member of the existing cluster, repeatable", read: repeated(member), field: "members" },
  follow: { flags: "-f, --follow", description: "wait for new entries until interrupted" },
} as const satisfies Record<string, AdminFlag>;

export type AdminFlagName = keyof typeof ADMIN_FLAGS;

/** The flags' values, read (commander's attribute names). */
export interface Values {
  ttl?: number | "never";
  maxUses?: number;
  description?: string;
  nodes?: string[];
  peerHosts?: string[];
  newCluster?: true;
  readOnly?: true;
  state?: string;
  limit?: number;
  after?: number;
  reason?: string;
  maxInFlight?: number;
  leaseSeconds?: number;
  admissionTtlSeconds?: number;
  maxQueue?: number;
  member?: { node: string; peerURL: string }[];
  follow?: true;
  /** `--cluster` as typed (never JOIN_BROKER_CLUSTER): for a subcommand that is not about one cluster but may be scoped to one. */
  cluster?: string;
  json?: true;
}

/** A refused input, said in the words the user typed: the flag, its value, and the rule. */
export function inFlagTerms(e: InvalidInput, leaf: Command): string {
  if (e.issues.length === 0) return e.message;
  return e.issues
    .map((i) => {
      const field = i.path.split(".")[0];
      const known = Object.values(ADMIN_FLAGS).find((f) => "field" in f && f.field === field);
      if (!known) return i.path ? `${i.path}: ${i.message}` : i.message;
      const flag = known.flags.split(" ")[0];
      const option = leaf.options.find((o) => o.long === flag);
      const typedText = option && givenText(option);
      const given = typedText !== undefined && !Array.isArray(leaf.getOptionValue(option!.attributeName())) ? ` ${typedText}` : "";
      const unit = "unit" in known ? ` ${known.unit}` : "";
      const rule =
        i.code === "too_small" && i.minimum !== undefined
          ? `must be at least ${i.minimum}${unit}`
          : i.code === "too_big" && i.maximum !== undefined
            ? `must be at most ${i.maximum}${unit}`
            : i.message.charAt(0).toLowerCase() + i.message.slice(1);
      return `${flag}${given}: ${rule}`;
    })
    .join("; ");
}
