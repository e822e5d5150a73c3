/**
 * A lean HTTP/1.1 client for load: node:http with keep-alive and no socket limit, so N
 * concurrent callers really hold N connections (200 long polls are 200 open requests), and
 * the client's own cost per request stays small next to the server's. `fetch` is the same
 * transport in the shape of `fetch`, for the typed broker client (`brokerClient(broker, { fetch })`).
 * @module
 */
import { Agent, request as httpRequest, type IncomingHttpHeaders } from "node:http";

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

interface Sent {
  method: string;
  path: string;
  headers: Record<string, string>;
  payload?: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

export class HttpClient {
  readonly #agent = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 1024 });
  readonly #origin: URL;
  /** Requests sent through this client, by `call` and by `fetch` alike. */
  requests = 0;

  constructor(origin: string) {
    this.#origin = new URL(origin);
  }

  call(method: string, path: string, options: { bearer?: string; body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<Reply> {
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
    const headers: Record<string, string> = { accept: "application/json", ...options.headers };
    if (options.bearer) headers.authorization = `Bearer ${options.bearer}`;
    if (payload !== undefined) headers["content-type"] = "application/json";
    return this.#send({ method, path, headers, payload, timeoutMs: options.timeoutMs ?? 60_000 }).then(({ status, headers, text }) => {
      let body: unknown = text;
      if (/json/.test(String(headers["content-type"] ?? ""))) {
        try {
          body = JSON.parse(text);
        } catch {
          /* leave it as text */
        }
      }
      return { status, headers, body };
    });
  }

  /**
   * `fetch` over this client's keep-alive agent, for requests to its origin. The caller's signal
   * (the typed client's deadline) ends the request; redirects are not followed.
   */
  readonly fetch: typeof fetch = async (input, init = {}) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (url.origin !== this.#origin.origin) throw new TypeError(`this client sends to ${this.#origin.origin}, not ${url.origin}`);
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    const payload = init.body == null ? undefined : String(init.body);
    const {
      status,
      headers: got,
      text,
    } = await this.#send({
      method: init.method ?? "GET",
      path: `${url.pathname}${url.search}`,
      headers,
      payload,
      timeoutMs: 0,
      signal: init.signal ?? undefined,
    });
    const answer = new Headers();
    for (const [name, value] of Object.entries(got)) for (const v of [value ?? []].flat()) answer.append(name, v);
    return new Response(status === 204 || status === 304 ? null : text, { status, headers: answer });
  };

  /** One request on the agent; `timeoutMs` 0 leaves the deadline to the caller's signal. */
  #send(sent: Sent): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
    this.requests++;
    const { method, path, payload, signal } = sent;
    const headers = payload === undefined ? sent.headers : { ...sent.headers, "content-length": String(Buffer.byteLength(payload)) };
    return new Promise((ok, fail) => {
      if (signal?.aborted) return fail(signal.reason);
      const req = httpRequest(
        { agent: this.#agent, hostname: this.#origin.hostname, port: this.#origin.port, method, path, headers, timeout: sent.timeoutMs || undefined, signal },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => ok({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString() }));
          res.on("error", fail);
        },
      );
      req.on("timeout", () => req.destroy(new Error(`${method} ${path} timed out`)));
      req.on("error", fail);
      req.end(payload);
    });
  }

  /** Like `call`, but any status other than those listed is an error. */
  async expect(statuses: number[], method: string, path: string, options: Parameters<HttpClient["call"]>[2] = {}): Promise<Reply> {
    const reply = await this.call(method, path, options);
    if (!statuses.includes(reply.status))
      throw new Error(`${method} ${path}: expected ${statuses.join("/")}, got ${reply.status}: ${JSON.stringify(reply.body)}`);
    return reply;
  }

  close(): void {
    this.#agent.destroy();
  }
}
