/**
 * A lean HTTP/1.1 client for load: node:http with keep-alive and no socket limit, so N
 * concurrent callers really hold N connections (200 long polls are 200 open requests), and
 * the client's own cost per request stays small next to the server's.
 * @module
 */
import { Agent, request as httpRequest } from "node:http";

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

export class HttpClient {
  readonly #agent = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 1024 });
  readonly #origin: URL;
  /** Requests sent through this client. */
  requests = 0;

  constructor(origin: string) {
    this.#origin = new URL(origin);
  }

  call(method: string, path: string, options: { bearer?: string; body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {}): Promise<Reply> {
    this.requests++;
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
    const headers: Record<string, string> = { accept: "application/json", ...options.headers };
    if (options.bearer) headers.authorization = `Bearer ${options.bearer}`;
    if (payload !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = String(Buffer.byteLength(payload));
    }
    return new Promise((ok, fail) => {
      const req = httpRequest(
        { agent: this.#agent, hostname: this.#origin.hostname, port: this.#origin.port, method, path, headers, timeout: options.timeoutMs ?? 60_000 },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString();
            let body: unknown = text;
            if (/json/.test(String(res.headers["content-type"] ?? ""))) {
              try {
                body = JSON.parse(text);
              } catch {
                /* leave it as text */
              }
            }
            ok({ status: res.statusCode ?? 0, headers: res.headers, body });
          });
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
