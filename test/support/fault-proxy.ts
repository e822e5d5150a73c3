/**
 * An HTTP proxy in front of the join API that misbehaves on purpose: for a window after it is
 * armed it answers 500 (the way k0s's join API fails while etcd has no quorum) or drops the
 * connection without an answer; and rules can hold chosen requests until released, or forward a
 * request and then drop its answer. Choices come from the caller's seeded random source.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface ProxiedRequest {
  method: string;
  path: string;
  /** The parsed JSON body, when there is one. */
  body: Record<string, unknown> | null;
}

export interface FaultStats {
  forwarded: number;
  answered500: number;
  dropped: number;
  held: number;
  droppedAnswers: number;
}

export interface FaultProxy {
  url: string;
  stats: FaultStats;
  /**
   * Fails every request for `ms` from now (or, with `fromFirstRequest`, from the next request on,
   * so that the window cannot pass before anyone calls): `dropShare` of them by dropping the
   * connection, the rest with 500.
   */
  failFor(ms: number, dropShare?: number, options?: { fromFirstRequest?: boolean }): void;
  /** Holds matching requests until `release()`; `onHeld` runs for each one held. */
  hold(match: (r: ProxiedRequest) => boolean, onHeld?: (r: ProxiedRequest) => void): void;
  /**
   * Forwards matching requests and drops the first answer whose status passes `status` (default:
   * any), so that the caller never learns the outcome; other answers pass.
   */
  dropAnswerOnce(match: (r: ProxiedRequest) => boolean, onDropped?: (r: ProxiedRequest) => void, status?: (code: number) => boolean): void;
  release(): void;
  close(): Promise<void>;
}

export async function startFaultProxy(target: string, random: () => number): Promise<FaultProxy> {
  const stats: FaultStats = { forwarded: 0, answered500: 0, dropped: 0, held: 0, droppedAnswers: 0 };
  let failUntil = 0;
  /** A window armed to open at the next request (`fromFirstRequest`), in ms. */
  let failNextFor = 0;
  let dropShare = 0.5;
  let holdRule: { match: (r: ProxiedRequest) => boolean; onHeld?: (r: ProxiedRequest) => void } | null = null;
  let dropAnswerRule: { match: (r: ProxiedRequest) => boolean; onDropped?: (r: ProxiedRequest) => void; status: (code: number) => boolean } | null = null;
  let waiting: (() => void)[] = [];
  const targetUrl = new URL(target);

  /** `dropAnswer` says whether to drop an answer with this status (and then accounts for it). */
  const forward = (req: IncomingMessage, raw: Buffer, res: ServerResponse, dropAnswer: ((status: number) => boolean) | null) => {
    stats.forwarded++;
    const upstream = httpRequest(
      { host: targetUrl.hostname, port: targetUrl.port, method: req.method, path: req.url, headers: { ...req.headers, host: targetUrl.host } },
      (answer) => {
        const chunks: Buffer[] = [];
        answer.on("data", (c: Buffer) => chunks.push(c));
        answer.on("end", () => {
          if (dropAnswer?.(answer.statusCode ?? 0)) {
            req.socket.destroy();
            return;
          }
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          res.end(Buffer.concat(chunks));
        });
      },
    );
    upstream.on("error", () => req.socket.destroy());
    upstream.end(raw);
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const raw = Buffer.concat(chunks);
      let body: Record<string, unknown> | null = null;
      try {
        body = raw.length ? (JSON.parse(raw.toString()) as Record<string, unknown>) : null;
      } catch {
        body = null;
      }
      const info: ProxiedRequest = { method: req.method ?? "GET", path: req.url ?? "/", body };
      if (failNextFor > 0) {
        failUntil = Date.now() + failNextFor;
        failNextFor = 0;
      }
      if (Date.now() < failUntil) {
        if (random() < dropShare) {
          stats.dropped++;
          req.socket.destroy();
        } else {
          stats.answered500++;
          res.writeHead(500, { "content-type": "text/plain" });
          res.end("etcdserver: request timed out\n");
        }
        return;
      }
      if (holdRule?.match(info)) {
        stats.held++;
        holdRule.onHeld?.(info);
        await new Promise<void>((resume) => waiting.push(resume));
      }
      let dropAnswer: ((status: number) => boolean) | null = null;
      if (dropAnswerRule?.match(info)) {
        const rule = dropAnswerRule;
        dropAnswer = (status) => {
          if (dropAnswerRule !== rule || !rule.status(status)) return false;
          dropAnswerRule = null;
          stats.droppedAnswers++;
          rule.onDropped?.(info);
          return true;
        };
      }
      forward(req, raw, res, dropAnswer);
    });
  });
  await new Promise<void>((ok) => server.listen(0, "127.0.0.1", ok));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    stats,
    failFor(ms, share = 0.5, options = {}) {
      if (options.fromFirstRequest) failNextFor = ms;
      else failUntil = Date.now() + ms;
      dropShare = share;
    },
    hold(match, onHeld) {
      holdRule = { match, onHeld };
    },
    dropAnswerOnce(match, onDropped, status = () => true) {
      dropAnswerRule = { match, onDropped, status };
    },
    release() {
      holdRule = null;
      const resume = waiting;
      waiting = [];
      for (const r of resume) r();
    },
    close: () =>
      new Promise<void>((ok) => {
        holdRule = null;
        for (const r of waiting) r();
        waiting = [];
        server.closeAllConnections();
        server.close(() => ok());
      }),
  };
}
