/**
 * What the console knows: the credential, the open cluster and what the broker last said about
 * it, plus the pure rules over it. `generation` counts the clusters opened: work started for an
 * earlier one sees a newer number and drops its result.
 * @module
 */
import type { AdminTicket, AuditEntry, ClusterStatus, EnrollmentToken } from "../../../shared/protocol/wire.ts";

export const TOKEN_KEY = "joinBroker.adminToken";
export const CLUSTERS_KEY = "joinBroker.clusters";
export const AUDIT_KEEP = 200;
export const KNOWN_CLUSTERS_KEEP = 20;

export interface ConsoleState {
  token: string;
  cluster: string;
  generation: number;
  abort: AbortController | null;
  status: ClusterStatus | null;
  tickets: AdminTicket[];
  tokens: EnrollmentToken[];
  audit: AuditEntry[];
  /** The audit seq to ask after. */
  next: number;
  refreshing: boolean;
  /** A change arrived during a refresh: one more is due. */
  dirty: boolean;
  /** Signed in with a read-only credential: the write controls are hidden. */
  readOnly: boolean;
}

export function initialState(token: string): ConsoleState {
  return {
    token,
    cluster: "",
    generation: 0,
    abort: null,
    status: null,
    tickets: [],
    tokens: [],
    audit: [],
    next: 0,
    refreshing: false,
    dirty: false,
    readOnly: false,
  };
}

/** The page's one state (the token is read from session storage at start). */
export const state: ConsoleState = initialState("");

/** Ends whatever was under way for the cluster open now. */
export function stop(s: ConsoleState = state): void {
  s.generation++;
  s.abort?.abort();
  s.abort = null;
}

/** Starts on `cluster` afresh; returns its generation and the signal that ends its requests. */
export function begin(cluster: string, s: ConsoleState = state): { generation: number; abort: AbortController } {
  stop(s);
  const abort = new AbortController();
  s.abort = abort;
  s.cluster = cluster;
  s.audit = [];
  s.next = 0;
  return { generation: s.generation, abort };
}

/** The audit entries kept: the newest AUDIT_KEEP. */
export function keepRecent(audit: AuditEntry[], entries: AuditEntry[]): AuditEntry[] {
  return audit.concat(entries).slice(-AUDIT_KEEP);
}

export function isLive(t: AdminTicket): boolean {
  return t.state === "queued" || t.state === "admitted";
}

/** The queue as shown: admitted tickets first (they hold a slot, '▶'), then queued ones by position. */
export function queueRows(tickets: AdminTicket[]): { ticket: AdminTicket; position: string }[] {
  const admitted = tickets.filter((t) => t.state === "admitted").map((ticket) => ({ ticket, position: "▶" }));
  const queued = tickets.filter((t) => t.state === "queued").map((ticket, i) => ({ ticket, position: String(i + 1) }));
  return [...admitted, ...queued];
}

/** The remembered clusters, the one just opened first, at most KNOWN_CLUSTERS_KEEP. */
export function remember(name: string, known: string[]): string[] {
  return [name, ...known.filter((c) => c !== name)].slice(0, KNOWN_CLUSTERS_KEEP);
}

/** Remembered clusters as stored (any JSON): the strings in it, or none. */
export function parseKnown(stored: string | null): string[] {
  try {
    const list: unknown = JSON.parse(stored || "[]");
    return Array.isArray(list) ? list.filter((c): c is string => typeof c === "string") : [];
  } catch {
    return [];
  }
}
