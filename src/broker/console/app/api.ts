/**
 * The admin API as the console calls it: the bearer header, problem+json errors as ApiError
 * (decided by status and code), the paged reads, and what an operator should read for a failure.
 * @module
 */
import type { AdminTicket, AuditPage, TicketList } from "../../../shared/protocol/wire.ts";
import { keepRecent, state } from "./state.ts";

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, problem: { detail?: string; code?: string } | null) {
    super(problem?.detail || "HTTP " + status);
    this.status = status;
    this.code = problem?.code || "http_" + status;
  }
}

/** A request ended by its abort signal: no failure to report, the page has moved on. */
export function isAbort(e: unknown): boolean {
  return (e as { name?: unknown } | null)?.name === "AbortError";
}

export function base(cluster: string = state.cluster): string {
  return "/v1/admin/clusters/" + encodeURIComponent(cluster);
}

export async function api<T = unknown>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  const headers: Record<string, string> = { authorization: "Bearer " + state.token, accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal, cache: "no-store" });
  } catch (e) {
    if (isAbort(e)) throw e;
    throw new ApiError(0, { code: "network", detail: "the broker did not answer (" + (e as Error | null)?.message + ")" });
  }
  const text = await res.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) throw new ApiError(res.status, (data as { detail?: string; code?: string } | null) || { detail: text.slice(0, 200) });
  return data as T;
}

/** What an operator should read for a failed call on `cluster`. */
export function explain(e: unknown, cluster: string): { title: string; detail: string } {
  if (!(e instanceof ApiError)) return { title: "Unexpected error", detail: String((e as Error | null)?.message || e) };
  if (e.status === 401)
    return {
      title: "Wrong admin token",
      detail: "The broker refused this admin token (401): " + e.message + ". Paste the ADMIN_TOKEN secret this broker was deployed with.",
    };
  if (e.status === 403)
    return {
      title: "Not allowed (403)",
      detail: "The broker refused this with a read-only credential: " + e.message + ". Sign in with the ADMIN_TOKEN to change anything.",
    };
  if (e.status === 429) return { title: "Too many failed attempts", detail: "This address made too many failed attempts; wait a minute before trying again." };
  if (e.code === "unknown_cluster")
    return {
      title: "Unknown cluster",
      detail: 'This broker has no cluster named "' + cluster + '". A cluster exists once it has an enrollment token or was adopted.',
    };
  if (e.status === 0) return { title: "Broker unreachable", detail: e.message };
  return { title: "Request failed (" + e.status + " " + e.code + ")", detail: e.message };
}

/** The audit log from `state.next` on, into `state.audit` (the newest kept). */
export async function loadAudit(signal?: AbortSignal): Promise<void> {
  for (;;) {
    const page = await api<AuditPage>("GET", base() + "/audit?limit=1000&after=" + state.next, undefined, signal);
    state.audit = keepRecent(state.audit, page.entries);
    state.next = page.next;
    if (page.entries.length < 1000) return;
  }
}

/** Every ticket the broker still lists, page by page. */
export async function loadTickets(signal?: AbortSignal): Promise<AdminTicket[]> {
  const all: AdminTicket[] = [];
  let after = 0;
  for (;;) {
    const page = await api<TicketList>("GET", base() + "/tickets?limit=1000&after=" + after, undefined, signal);
    all.push(...page.tickets);
    if (page.next === null || page.next === undefined) return all;
    after = page.next;
  }
}
