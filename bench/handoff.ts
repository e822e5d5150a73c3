/**
 * (2) Queue hand-off: 200 nodes wait in long polls (GET …?wait=30, re-polling when a poll ends
 * with the ticket still queued, honouring Retry-After on 429/503). Each node completes the
 * moment it holds its admission token, as if its join took no time, so the queue drains as fast
 * as the broker can hand the slot on. Measured: from sending `complete` for one node to the
 * next node's long poll returning with its admission token; and every broker request each node
 * made (ticket request, polls, complete).
 * @module
 */
import { BrokerProblem, type Reply, type TicketView } from "../src/shared/client/index.ts";
import { admitted as asAdmitted, type BrokerProcess } from "../test/support/stack.ts";
import { completeTicket, createCluster, requestTicket, type BenchCluster } from "./support/cluster.ts";
import { HttpClient } from "./support/http.ts";
import { log, median, percentile, pool, round, sleep } from "./support/stats.ts";

export interface HandoffRun {
  run: number;
  nodes: number;
  admitted: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  requestsPerNode: number;
  pollsPerNode: number;
  /** Requests per node for the first and last quarter of the queue (short and long waits). */
  requestsPerNodeFirstQuarter: number;
  requestsPerNodeLastQuarter: number;
  longestWaitSeconds: number;
  drainSeconds: number;
  /** Most long polls open at the same moment (all of them, when the client really holds them concurrently). */
  maxConcurrentPolls: number;
}

export interface HandoffResult {
  nodes: number;
  waitSeconds: number;
  runs: HandoffRun[];
  summary: { p50Ms: number; p99Ms: number; requestsPerNode: number; pollsPerNode: number; medianRunP50Ms: number; medianRunP99Ms: number };
}

const WAIT_SECONDS = 30;

interface NodeState {
  node: string;
  ticket: string;
  /** Place in the queue when the ticket was created (nothing is admitted meanwhile). */
  position: number;
  requests: number;
  polls: number;
  queuedAt: number;
  admittedAt: number;
}

export async function handoff(broker: BrokerProcess, options: { runs: number; nodes: number }): Promise<HandoffResult> {
  const runs: HandoffRun[] = [];
  const pooled: number[] = [];
  for (let run = 0; run < options.runs; run++) {
    const http = new HttpClient(broker.url);
    try {
      const result = await oneRun(http, broker, run, options.nodes);
      runs.push(result.run);
      pooled.push(...result.samples);
      log(`hand-off run ${run + 1}/${options.runs}: p50 ${result.run.p50Ms} ms, p99 ${result.run.p99Ms} ms, ${result.run.requestsPerNode} requests/node`);
    } finally {
      http.close();
    }
  }
  return {
    nodes: options.nodes,
    waitSeconds: WAIT_SECONDS,
    runs,
    summary: {
      p50Ms: round(percentile(pooled, 50)),
      p99Ms: round(percentile(pooled, 99)),
      requestsPerNode: round(median(runs.map((r) => r.requestsPerNode)), 3),
      pollsPerNode: round(median(runs.map((r) => r.pollsPerNode)), 3),
      medianRunP50Ms: round(median(runs.map((r) => r.p50Ms))),
      medianRunP99Ms: round(median(runs.map((r) => r.p99Ms))),
    },
  };
}

async function oneRun(http: HttpClient, broker: BrokerProcess, run: number, count: number): Promise<{ run: HandoffRun; samples: number[] }> {
  const cluster: BenchCluster = await createCluster(http, broker, `handoff-${run}`);
  // The bootstrap node holds the slot while the others queue behind it.
  const boot = asAdmitted((await requestTicket(cluster, "boot")).body);

  const nodes: NodeState[] = [];
  await pool(count, 32, async (i) => {
    const node = `node-${String(i).padStart(4, "0")}`;
    const reply = await requestTicket(cluster, node);
    if (reply.status !== 202 || reply.body.state !== "queued" || reply.body.position === undefined)
      throw new Error(`node ${node} was not queued: ${reply.status}`);
    nodes[i] = { node, ticket: reply.body.ticket, position: reply.body.position, requests: 1, polls: 0, queuedAt: 0, admittedAt: 0 };
  });

  const samples: number[] = [];
  let lastCompleteSentAt = 0;
  let admitted = 0;
  let openPolls = 0;
  let maxConcurrentPolls = 0;
  let failure: Error | null = null;
  const deadline = Date.now() + 240_000;

  let memberIDs = 0x1000;
  const complete = async (ticket: string, admission: string) => {
    lastCompleteSentAt = performance.now();
    await completeTicket(cluster, ticket, admission, (memberIDs++).toString(16));
  };

  const waitAndJoin = async (n: NodeState) => {
    n.queuedAt = performance.now();
    while (Date.now() < deadline) {
      n.requests++;
      n.polls++;
      maxConcurrentPolls = Math.max(maxConcurrentPolls, ++openPolls);
      let reply: Reply<TicketView>;
      try {
        reply = await cluster.nodes.ticket(n.ticket, WAIT_SECONDS);
      } catch (e) {
        if (!(e instanceof BrokerProblem) || (e.status !== 429 && e.status !== 503)) throw e;
        await sleep((e.retryAfter ?? 1) * 1000);
        continue;
      } finally {
        openPolls--;
      }
      const view = reply.body;
      if (reply.status === 202 || view.state === "queued") continue;
      if (view.state !== "admitted" || !view.admission) throw new Error(`node ${n.node}: unexpected ${reply.status} ${JSON.stringify(view)}`);
      n.admittedAt = performance.now();
      samples.push(n.admittedAt - lastCompleteSentAt);
      admitted++;
      n.requests++;
      await complete(n.ticket, view.admission);
      return;
    }
    throw new Error(`node ${n.node} was not admitted in time`);
  };

  const started = performance.now();
  const waiting = nodes.map((n) =>
    waitAndJoin(n).catch((e: Error) => {
      failure ??= e;
    }),
  );
  // Let every long poll reach the Durable Object before the first hand-off.
  await sleep(1_500);
  await complete(boot.ticket, boot.admission);
  await Promise.all(waiting);
  if (failure) throw failure;
  const drainSeconds = (performance.now() - started) / 1000 - 1.5;

  nodes.sort((a, b) => a.position - b.position);
  const perNode = (list: NodeState[]) => list.reduce((s, n) => s + n.requests, 0) / list.length;
  const quarter = Math.max(1, Math.floor(count / 4));
  return {
    samples,
    run: {
      run,
      nodes: count,
      admitted,
      p50Ms: round(percentile(samples, 50)),
      p90Ms: round(percentile(samples, 90)),
      p99Ms: round(percentile(samples, 99)),
      maxMs: round(Math.max(...samples)),
      requestsPerNode: round(perNode(nodes), 3),
      pollsPerNode: round(nodes.reduce((s, n) => s + n.polls, 0) / count, 3),
      requestsPerNodeFirstQuarter: round(perNode(nodes.slice(0, quarter)), 3),
      requestsPerNodeLastQuarter: round(perNode(nodes.slice(-quarter)), 3),
      longestWaitSeconds: round(Math.max(...nodes.map((n) => n.admittedAt - n.queuedAt)) / 1000, 2),
      drainSeconds: round(drainSeconds, 2),
      maxConcurrentPolls,
    },
  };
}
