/**
 * The bench Worker: the production broker app and Durable Object unchanged, with extra
 * calls that production does not need. `GET /bench/clusters/{cluster}/ping` is one RPC round
 * trip to the cluster's Durable Object that does nothing (the ceiling any broker request can
 * reach on this runtime); `GET /bench/clusters/{cluster}/stats` reports the size of the Durable
 * Object's SQLite database as the object itself sees it; `GET /bench/clusters/{cluster}/log-level?level=debug|info|warn`
 * sets the object's LOG_LEVEL while it runs, to measure what a log line per state change costs
 * (under `wrangler dev`: workerd's tail stream and stdout, read and printed by wrangler);
 * `GET /bench/clusters/{cluster}/advance?ms=N` moves the object's clock and
 * `GET /bench/clusters/{cluster}/alarm` runs its alarm handler, to measure retention.
 * @module
 */
import { app } from "../../src/broker/app.ts";
import { JoinQueue as BrokerJoinQueue } from "../../src/broker/queue/join-queue.ts";
import { parseLogLevel, type LogLevel } from "../../src/broker/queue/event-log.ts";

/** The production JoinQueue, plus the bench calls. Every production method is inherited as is. */
export class JoinQueue extends BrokerJoinQueue {
  ping(): number {
    return 1;
  }

  stats(): { databaseSize: number } {
    return { databaseSize: this.ctx.storage.sql.databaseSize };
  }

  setLogLevel(level: LogLevel): LogLevel {
    this.logLevel = level;
    return level;
  }

  /** Moves the object's clock (its time seam) forward, e.g. past a retention window. */
  advanceClock(ms: number): number {
    return this.clock.advance(ms);
  }

  /** Runs the alarm handler now (lease expiry, admissions, the retention sweep). */
  async runAlarm(): Promise<{ databaseSize: number }> {
    await this.alarm();
    return this.stats();
  }
}

const BENCH_PATH = /^\/bench\/clusters\/([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)\/(ping|stats|log-level|advance|alarm)$/;

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const match = request.method === "GET" ? BENCH_PATH.exec(url.pathname) : null;
    if (!match) return app.fetch(request, env, ctx);
    const stub = env.JOIN_QUEUE.getByName(match[1]) as unknown as DurableObjectStub<JoinQueue>;
    if (match[2] === "ping") return Response.json({ pong: await stub.ping() });
    if (match[2] === "stats") return Response.json(await stub.stats());
    if (match[2] === "advance") return Response.json({ now: await stub.advanceClock(Number(url.searchParams.get("ms") ?? 0)) });
    if (match[2] === "alarm") return Response.json(await stub.runAlarm());
    return Response.json({ logLevel: await stub.setLogLevel(parseLogLevel(url.searchParams.get("level") ?? undefined)) });
  },
} satisfies ExportedHandler<Env>;
