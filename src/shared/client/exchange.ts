/**
 * One JSON exchange that does not throw for an HTTP answer: JSON in, JSON (or problem+json) out,
 * a timeout on every request, and the `Retry-After`, `ETag` and `Date` headers the broker and the
 * join API use for backpressure. For callers that decide by status (the node agent's session
 * with the broker and its join-API calls); the typed client's `Transport` throws instead.
 * Transport failures (refused, reset, timed out) are thrown as `TransportError` so that callers
 * can tell "the server said no" from "the server could not be reached".
 * @module
 */
import type { Problem } from "../protocol/problem.ts";
import { toProblem } from "./errors.ts";

export interface HttpResult<T> {
  status: number;
  /** The parsed JSON body of a 2xx answer; null otherwise or when it is not JSON. */
  body: T | null;
  /** The problem of a 4xx/5xx answer (or a stand-in built from the status when the body is not problem+json). */
  problem: Problem<string> | null;
  /** Seconds, from `Retry-After` (delta seconds or an HTTP date). */
  retryAfter: number | null;
  etag: string | null;
  /** The server's clock (its `Date` header) in ms, to measure time on the server's terms. */
  date: number | null;
}

/** The request never got an HTTP answer: connection refused or reset, DNS, or our own timeout. */
export class TransportError extends Error {
  override readonly name = "TransportError";
  readonly code = "ERR_TRANSPORT";
  constructor(
    readonly url: string,
    readonly reason: string,
  ) {
    super(`${url}: ${reason}`);
  }
}

export interface RequestOptions {
  method?: string;
  bearer?: string;
  body?: unknown;
  headers?: Record<string, string>;
  timeoutMs: number;
  /** Aborting it rejects with the signal's reason (not a TransportError). */
  signal?: AbortSignal;
  /** Another `fetch` than the global one (a Node process's own over node:http, say). */
  fetch?: typeof fetch;
}

export async function requestJson<T>(url: string, options: RequestOptions): Promise<HttpResult<T>> {
  const headers: Record<string, string> = { accept: "application/json, application/problem+json", ...options.headers };
  if (options.bearer) headers.authorization = `Bearer ${options.bearer}`;
  if (options.body !== undefined) headers["content-type"] = "application/json";
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  let response: Response;
  let text: string;
  try {
    response = await (options.fetch ?? fetch)(url, {
      method: options.method ?? "GET",
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal,
    });
    text = await response.text();
  } catch (e) {
    if (options.signal?.aborted) throw options.signal.reason;
    if (timeout.aborted) throw new TransportError(url, `no answer within ${Math.round(options.timeoutMs / 1000)} s`);
    throw new TransportError(url, describeFetchError(e));
  }
  const ok = response.status >= 200 && response.status < 300;
  const parsed = ok ? parseJson(text) : null;
  const problem = ok ? null : toProblem(response.status, text);
  return {
    status: response.status,
    body: ok ? (parsed as T | null) : null,
    problem,
    retryAfter: parseRetryAfter(response.headers.get("retry-after"), Date.now()),
    etag: response.headers.get("etag"),
    date: parseDate(response.headers.get("date")),
  };
}

function parseJson(text: string): unknown {
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** Seconds from a `Retry-After` value: delta seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null, nowMs: number): number | null {
  if (value === null) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return null;
  return Math.max(0, Math.ceil((date - nowMs) / 1000));
}

function parseDate(value: string | null): number | null {
  const ms = value ? Date.parse(value) : NaN;
  return Number.isNaN(ms) ? null : ms;
}

/** A short reason for a failed fetch: undici hides the useful part (ECONNREFUSED, …) in `cause`. */
export function describeFetchError(e: unknown): string {
  if (!(e instanceof Error)) return String(e);
  const cause = (e as { cause?: unknown }).cause;
  if (cause instanceof Error) {
    const code = (cause as { code?: string }).code;
    return code ? `${code}: ${cause.message}` : cause.message;
  }
  return e.message;
}

/** A one-line description of an HTTP answer that was not what the caller wanted. */
export function describeAnswer(result: HttpResult<unknown>): string {
  const p = result.problem;
  if (!p) return `HTTP ${result.status}`;
  // A code synthesized from the status (no problem body) says nothing the status does not.
  const code = p.code && p.code !== `http_${result.status}` ? ` ${p.code}` : "";
  return `HTTP ${result.status}${code}${p.detail ? `: ${p.detail}` : ""}`;
}
