/**
 * (1) Broker throughput and latency: ticket creations per second against one cluster's Durable
 * Object, with many concurrent clients, beside the ceiling measured in the same process of the
 * same Worker: a no-op RPC round trip to that same Durable Object. The broker runs with its
 * default LOG_LEVEL (info: a new ticket is a debug line, so it writes none). For information, a
 * third phase creates tickets with LOG_LEVEL=debug, one log line per ticket, which shows what the
 * local log pipeline (workerd's tail stream and stdout, read and printed by wrangler) costs per
 * line. The phases take turns in chunks of 250 requests, in rotating order, so that load
 * from elsewhere on a shared machine falls on all of them alike.
 * @module
 */
import type { BrokerProcess } from "../test/support/stack.ts";
import { createCluster, requestTicket, type BenchCluster } from "./support/cluster.ts";
import { HttpClient } from "./support/http.ts";
import { log, median, percentile, pool, round } from "./support/stats.ts";

export interface PhaseFigures {
  requests: number;
  seconds: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
}

export interface ThroughputRun {
  run: number;
  order: string;
  ceiling: PhaseFigures;
  tickets: PhaseFigures;
  ticketsAllLogged: PhaseFigures;
  ratio: number;
  ratioAllLogged: number;
}

export interface ThroughputResult {
  concurrency: number;
  requestsPerPhase: number;
  runs: ThroughputRun[];
  summary: {
    ceilingPerSecond: number;
    ticketsPerSecond: number;
    ratio: number;
    ticketsAllLoggedPerSecond: number;
    ratioAllLogged: number;
    ticketsP50Ms: number;
    ticketsP99Ms: number;
    ceilingP50Ms: number;
    ceilingP99Ms: number;
  };
}

const PHASES = ["ceiling", "tickets", "ticketsAllLogged"] as const;
type Phase = (typeof PHASES)[number];

/** `count` requests from `concurrency` clients in a closed loop: each sends its next request when the last one returns. */
async function chunk(
  count: number,
  concurrency: number,
  one: () => Promise<unknown>,
  into: { latencies: number[]; ms: number; requests: number },
): Promise<void> {
  const started = performance.now();
  await pool(count, concurrency, async () => {
    const t0 = performance.now();
    await one();
    into.latencies.push(performance.now() - t0);
  });
  into.ms += performance.now() - started;
  into.requests += count;
}

function figuresOf(p: { latencies: number[]; ms: number; requests: number }): PhaseFigures {
  const seconds = p.ms / 1000;
  return {
    requests: p.requests,
    seconds: round(seconds, 3),
    perSecond: round(p.requests / seconds, 1),
    p50Ms: round(percentile(p.latencies, 50)),
    p99Ms: round(percentile(p.latencies, 99)),
  };
}

/** Requests per chunk: the phases take turns chunk by chunk, so that all meet the same load on a shared machine. */
const CHUNK = 250;

export async function brokerThroughput(broker: BrokerProcess, options: { runs: number; requests: number; concurrency: number }): Promise<ThroughputResult> {
  const http = new HttpClient(broker.url);
  const runs: ThroughputRun[] = [];
  const pooled = { ceiling: [] as number[], tickets: [] as number[], ticketsAllLogged: [] as number[] };
  const warmup = Math.min(100, Math.ceil(options.requests / 5));
  try {
    for (let run = 0; run < options.runs; run++) {
      // A fresh cluster per phase, so that every phase meets the same queue depth; each is warmed
      // first (isolate, Durable Object, SQLite pages, keep-alive sockets) with up to 100 pings and
      // 100 tickets. The ping and the log level are the bench Worker's own routes, not the
      // broker's API: the typed client has no call for them, so they stay raw on the same agent.
      const ping = (cluster: BenchCluster) => http.expect([200], "GET", `/bench/clusters/${cluster.name}/ping`);
      const logLevel = (cluster: BenchCluster, level: "debug" | "info") =>
        http.expect([200], "GET", `/bench/clusters/${cluster.name}/log-level?level=${level}`);
      const clusters = {} as Record<Phase, BenchCluster>;
      for (const name of PHASES) {
        const cluster = await createCluster(http, broker, `throughput-${run}-${name.toLowerCase()}`);
        await pool(warmup, options.concurrency, async () => void (await ping(cluster)));
        await pool(warmup, options.concurrency, async (i) => void (await requestTicket(cluster, `warm-${i}`)));
        clusters[name] = cluster;
      }
      let node = 0;
      const requestOf: Record<Phase, () => Promise<unknown>> = {
        ceiling: () => ping(clusters.ceiling),
        tickets: () => requestTicket(clusters.tickets, `node-${node++}`),
        ticketsAllLogged: () => requestTicket(clusters.ticketsAllLogged, `node-${node++}`),
      };
      const measured = Object.fromEntries(PHASES.map((p) => [p, { latencies: [] as number[], ms: 0, requests: 0 }])) as Record<
        Phase,
        { latencies: number[]; ms: number; requests: number }
      >;
      const chunks = Math.max(1, Math.round(options.requests / CHUNK));
      for (let c = 0; c < chunks; c++) {
        const size = c === chunks - 1 ? options.requests - CHUNK * (chunks - 1) : CHUNK;
        for (let j = 0; j < PHASES.length; j++) {
          const name = PHASES[(run + c + j) % PHASES.length]!;
          if (name === "ticketsAllLogged") await logLevel(clusters[name], "debug");
          try {
            await chunk(size, options.concurrency, requestOf[name], measured[name]);
          } finally {
            if (name === "ticketsAllLogged") await logLevel(clusters[name], "info");
          }
        }
      }
      const figures = Object.fromEntries(PHASES.map((p) => [p, figuresOf(measured[p])])) as Record<Phase, PhaseFigures>;
      for (const p of PHASES) pooled[p].push(...measured[p].latencies);
      const order = `${chunks} rounds of ${CHUNK}, rotating`;
      const ratio = round(figures.tickets.perSecond / figures.ceiling.perSecond, 3);
      const ratioAllLogged = round(figures.ticketsAllLogged.perSecond / figures.ceiling.perSecond, 3);
      runs.push({ run, order, ceiling: figures.ceiling, tickets: figures.tickets, ticketsAllLogged: figures.ticketsAllLogged, ratio, ratioAllLogged });
      log(
        `broker run ${run + 1}/${options.runs}: tickets ${figures.tickets.perSecond}/s (p50 ${figures.tickets.p50Ms} ms), ceiling ${figures.ceiling.perSecond}/s, ratio ${ratio} (${ratioAllLogged} with every change logged)`,
      );
    }
  } finally {
    http.close();
  }
  return {
    concurrency: options.concurrency,
    requestsPerPhase: options.requests,
    runs,
    summary: {
      ceilingPerSecond: round(median(runs.map((r) => r.ceiling.perSecond)), 1),
      ticketsPerSecond: round(median(runs.map((r) => r.tickets.perSecond)), 1),
      ratio: round(median(runs.map((r) => r.ratio)), 3),
      ticketsAllLoggedPerSecond: round(median(runs.map((r) => r.ticketsAllLogged.perSecond)), 1),
      ratioAllLogged: round(median(runs.map((r) => r.ratioAllLogged)), 3),
      ticketsP50Ms: round(percentile(pooled.tickets, 50)),
      ticketsP99Ms: round(percentile(pooled.tickets, 99)),
      ceilingP50Ms: round(percentile(pooled.ceiling, 50)),
      ceilingP99Ms: round(percentile(pooled.ceiling, 99)),
    },
  };
}
