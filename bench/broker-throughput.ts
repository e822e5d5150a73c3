/**
 * (1) Broker throughput and latency: ticket creations per second against one cluster's Durable
 * Object, with many concurrent clients, beside the ceiling measured in the same process of the
 * same Worker: a no-op RPC round trip to that same Durable Object. For information, a third
 * phase creates tickets with console output discarded in the Worker and the object, which shows
 * what the local log pipeline (every state change is a log line that workerd writes and wrangler
 * prints) costs. The phases rotate order from run to run so that drift on a shared machine
 * favours none of them.
 * @module
 */
import type { BenchBroker } from "./support/broker.ts";
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
  ticketsWithoutLogs: PhaseFigures;
  ratio: number;
  ratioWithoutLogs: number;
}

export interface ThroughputResult {
  concurrency: number;
  requestsPerPhase: number;
  runs: ThroughputRun[];
  summary: {
    ceilingPerSecond: number;
    ticketsPerSecond: number;
    ratio: number;
    ticketsWithoutLogsPerSecond: number;
    ratioWithoutLogs: number;
    ticketsP50Ms: number;
    ticketsP99Ms: number;
    ceilingP50Ms: number;
    ceilingP99Ms: number;
  };
}

const PHASES = ["ceiling", "tickets", "ticketsWithoutLogs"] as const;
type Phase = (typeof PHASES)[number];

async function phase(count: number, concurrency: number, one: (i: number) => Promise<unknown>): Promise<{ figures: PhaseFigures; latencies: number[] }> {
  const latencies: number[] = [];
  const started = performance.now();
  await pool(count, concurrency, async (i) => {
    const t0 = performance.now();
    await one(i);
    latencies.push(performance.now() - t0);
  });
  const seconds = (performance.now() - started) / 1000;
  return {
    figures: { requests: count, seconds: round(seconds, 3), perSecond: round(count / seconds, 1), p50Ms: round(percentile(latencies, 50)), p99Ms: round(percentile(latencies, 99)) },
    latencies,
  };
}

export async function brokerThroughput(broker: BenchBroker, options: { runs: number; requests: number; concurrency: number }): Promise<ThroughputResult> {
  const http = new HttpClient(broker.url);
  const runs: ThroughputRun[] = [];
  const pooled = { ceiling: [] as number[], tickets: [] as number[], ticketsWithoutLogs: [] as number[] };
  try {
    for (let run = 0; run < options.runs; run++) {
      // A fresh cluster per phase, so that every phase meets the same queue depth; each is warmed
      // first (isolate, Durable Object, SQLite pages, keep-alive sockets).
      const fresh = async (phaseName: Phase): Promise<BenchCluster> => {
        const cluster = await createCluster(http, broker.adminToken, `throughput-${run}-${phaseName.toLowerCase()}`);
        await pool(100, options.concurrency, async () => void (await ping(cluster)));
        await pool(100, options.concurrency, async (i) => void (await requestTicket(http, cluster, `warm-${i}`)));
        return cluster;
      };
      const ping = (cluster: BenchCluster) => http.expect([200], "GET", `/bench/clusters/${cluster.name}/ping`);
      const logging = (cluster: BenchCluster, on: boolean) => http.expect([200], "GET", `/bench/clusters/${cluster.name}/logs?on=${on ? 1 : 0}`);

      const phases: Record<Phase, () => ReturnType<typeof phase>> = {
        ceiling: async () => {
          const cluster = await fresh("ceiling");
          return phase(options.requests, options.concurrency, () => ping(cluster));
        },
        tickets: async () => {
          const cluster = await fresh("tickets");
          return phase(options.requests, options.concurrency, (i) => requestTicket(http, cluster, `node-${i}`));
        },
        ticketsWithoutLogs: async () => {
          const cluster = await fresh("ticketsWithoutLogs");
          await logging(cluster, false);
          try {
            return await phase(options.requests, options.concurrency, (i) => requestTicket(http, cluster, `node-${i}`));
          } finally {
            await logging(cluster, true);
          }
        },
      };
      const order = PHASES.map((_, i) => PHASES[(i + run) % PHASES.length]!);
      const figures = {} as Record<Phase, PhaseFigures>;
      for (const name of order) {
        const { figures: f, latencies } = await phases[name]();
        figures[name] = f;
        pooled[name].push(...latencies);
      }
      const ratio = round(figures.tickets.perSecond / figures.ceiling.perSecond, 3);
      const ratioWithoutLogs = round(figures.ticketsWithoutLogs.perSecond / figures.ceiling.perSecond, 3);
      runs.push({ run, order: order.join(", "), ceiling: figures.ceiling, tickets: figures.tickets, ticketsWithoutLogs: figures.ticketsWithoutLogs, ratio, ratioWithoutLogs });
      log(`broker run ${run + 1}/${options.runs}: tickets ${figures.tickets.perSecond}/s (p50 ${figures.tickets.p50Ms} ms), ceiling ${figures.ceiling.perSecond}/s, ratio ${ratio} (${ratioWithoutLogs} without logs)`);
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
      ticketsWithoutLogsPerSecond: round(median(runs.map((r) => r.ticketsWithoutLogs.perSecond)), 1),
      ratioWithoutLogs: round(median(runs.map((r) => r.ratioWithoutLogs)), 3),
      ticketsP50Ms: round(percentile(pooled.tickets, 50)),
      ticketsP99Ms: round(percentile(pooled.tickets, 99)),
      ceilingP50Ms: round(percentile(pooled.ceiling, 50)),
      ceilingP99Ms: round(percentile(pooled.ceiling, 99)),
    },
  };
}
