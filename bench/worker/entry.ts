/**
 * The bench Worker: the production broker app and Durable Object unchanged, with extra
 * calls that production does not need. `GET /bench/clusters/{cluster}/ping` is one RPC round
 * trip to the cluster's Durable Object that does nothing (the ceiling any broker request can
 * reach on this runtime); `GET /bench/clusters/{cluster}/stats` reports the size of the Durable
 * Object's SQLite database as the object itself sees it; `GET /bench/clusters/{cluster}/logs?on=0|1`
 * discards (or restores) console output in the Worker and the object, to measure what the local
 * log pipeline (workerd's stdout, printed by wrangler) costs per state change.
 * @module
 */
import { app } from "../../src/app.ts";
import { JoinQueue as BrokerJoinQueue } from "../../src/queue/join-queue.ts";

/** The production JoinQueue, plus the bench calls. Every production method is inherited as is. */
export class JoinQueue extends BrokerJoinQueue {
  ping(): number {
    return 1;
  }

  stats(): { databaseSize: number } {
    return { databaseSize: this.ctx.storage.sql.databaseSize };
  }

  setLogging(on: boolean): boolean {
    return setLogging(on);
  }
}

const consoleLog = console.log;

/** Console output on or off in this isolate (the object may share it with the Worker, or not). */
function setLogging(on: boolean): boolean {
  console.log = on ? consoleLog : () => {};
  return on;
}

const BENCH_PATH = /^\/bench\/clusters\/([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)\/(ping|stats|logs)$/;

export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    const match = request.method === "GET" ? BENCH_PATH.exec(url.pathname) : null;
    if (!match) return app.fetch(request, env, ctx);
    const stub = env.JOIN_QUEUE.getByName(match[1]) as unknown as DurableObjectStub<JoinQueue>;
    if (match[2] === "ping") return Response.json({ pong: await stub.ping() });
    if (match[2] === "stats") return Response.json(await stub.stats());
    const on = url.searchParams.get("on") !== "0";
    setLogging(on);
    return Response.json({ logging: await stub.setLogging(on) });
  },
} satisfies ExportedHandler<Env>;
