/**
 * One HTTP exchange with the broker: JSON in, JSON (or problem+json) out, with a deadline.
 * Runs on Node >= 20 and in Workers: it needs only `fetch`, `URL` and `AbortSignal`.
 * @module
 */
import { BrokerProblem, BrokerUnreachable, toProblem } from "./errors.ts";
import { describeFetchError, parseRetryAfter } from "./exchange.ts";

/** A successful answer: the parsed body, plus the exact text for callers that pass it on unchanged. */
export interface Reply<T> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface TransportOptions {
  /** The broker's base URL, e.g. `https://broker.example.com` (a path prefix is kept). */
  baseUrl: string;
  /** Sent as `Authorization: Bearer …` when set. */
  bearer?: string;
  /** Per-request deadline, added to any long-poll wait; default 30 s. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  userAgent?: string;
}

export interface RequestOptions {
  query?: Record<string, string | number | undefined | null>;
  body?: unknown;
  /** Extra time the broker may hold the request (long poll). */
  waitSeconds?: number;
  signal?: AbortSignal;
  headers?: Record<string, string>;
  /** Accept a non-JSON success body (e.g. Prometheus text); `body` is then the text. */
  text?: boolean;
}

const DEFAULT_TIMEOUT_MS = 30_000;

export class Transport {
  readonly baseUrl: string;
  readonly #bearer: string | undefined;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;
  readonly #userAgent: string;

  constructor(options: TransportOptions) {
    let url: URL;
    try {
      url = new URL(options.baseUrl);
    } catch {
      throw new TypeError(`broker URL ${JSON.stringify(options.baseUrl)} is not an absolute URL`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError(`broker URL must use http or https, not ${url.protocol}`);
    this.baseUrl = url.href.replace(/\/+$/, "");
    this.#bearer = options.bearer;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#userAgent = options.userAgent ?? "join-broker-client/1";
  }

  url(path: string, query: RequestOptions["query"] = {}): string {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) params.set(k, String(v));
    const qs = params.toString();
    return `${this.baseUrl}${path}${qs ? `?${qs}` : ""}`;
  }

  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<Reply<T>> {
    const url = this.url(path, options.query);
    const headers: Record<string, string> = {
      accept: options.text ? "text/plain, application/json" : "application/json",
      "user-agent": this.#userAgent,
      ...options.headers,
    };
    if (this.#bearer) headers.authorization = `Bearer ${this.#bearer}`;
    let body: string | undefined;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["content-type"] = "application/json";
    }
    // One controller per request, fed by the deadline and the caller's signal, and detached
    // afterwards: long-lived callers (a follower) must not pile listeners on their signal.
    const limitMs = this.#timeoutMs + (options.waitSeconds ?? 0) * 1000;
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error("deadline"));
    }, limitMs);
    const forward = () => controller.abort(options.signal?.reason);
    options.signal?.addEventListener("abort", forward, { once: true });
    if (options.signal?.aborted) forward();

    let res: Response;
    let text: string;
    try {
      res = await this.#fetch(url, { method, headers, body, signal: controller.signal, redirect: "error" });
      text = await res.text();
    } catch (e) {
      if (options.signal?.aborted) throw options.signal.reason ?? e;
      const why = timedOut ? `no answer within ${Math.round(limitMs / 1000)} s` : describeFetchError(e);
      throw new BrokerUnreachable(`cannot reach the broker at ${this.baseUrl}: ${why}`, { cause: e });
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", forward);
    }

    if (!res.ok) {
      // The one Retry-After parser: no header is no hint (never 0), an HTTP date counts too.
      const retry = parseRetryAfter(res.headers.get("retry-after"), Date.now());
      throw new BrokerProblem(res.status, toProblem(res.status, text), text, retry ?? undefined);
    }
    if (options.text) return { status: res.status, headers: res.headers, body: text as T, text };
    let parsed: T;
    try {
      parsed = JSON.parse(text) as T;
    } catch (e) {
      throw new BrokerUnreachable(`the broker at ${this.baseUrl} answered ${method} ${path} with HTTP ${res.status} but not JSON: ${text.slice(0, 120)}`, {
        cause: e,
      });
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  }
}
