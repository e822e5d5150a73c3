/**
 * (3) Queue scale: N tickets (10,000; fewer in quick mode) in one cluster, then the queue is
 * drained one admission at a time (maxInFlight 1): the admitted node completes, the next one is
 * admitted. Afterwards the audit log must show every ticket admitted exactly once, in ticket
 * (FIFO) order, and the ticket list every ticket joined. Runs on a broker process of its own so
 * that the memory figures belong to this cluster alone.
 *
 * Memory is the resident set (VmRSS, and the peak VmHWM) of the workerd process that runs the
 * Worker and its Durable Objects; workerd does not report memory per object. Storage is the
 * object's SQLite database: its size as the object reports it (`ctx.storage.sql.databaseSize`)
 * and the size of its files under the persist directory.
 * @module
 */
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { DEFAULT_RETENTION } from "../src/broker/queue/policy.ts";
import { processMemory } from "../test/support/processes.ts";
import type { BrokerProcess } from "../test/support/stack.ts";
import { allAudit, allTickets, completeTicket, createCluster, peerUrlOf, requestTicket, type BenchCluster } from "./support/cluster.ts";
import { HttpClient } from "./support/http.ts";
import { log, pool, round } from "./support/stats.ts";

export interface ScaleSnapshot {
  workerdRssBytes: number | null;
  workerdPeakRssBytes: number | null;
  databaseSizeBytes: number;
  sqliteFiles: { path: string; bytes: number }[];
}

export interface ScaleResult {
  tickets: number;
  concurrency: number;
  createSeconds: number;
  createdPerSecond: number;
  /** Creation rate over the first and the last tenth of the tickets: does a deeper queue slow it down? */
  createdPerSecondFirstTenth: number;
  createdPerSecondLastTenth: number;
  drainSeconds: number;
  admittedPerSecond: number;
  admittedPerSecondFirstTenth: number;
  admittedPerSecondLastTenth: number;
  /** Requests the driver sent while draining, per admitted ticket. */
  drainRequestsPerTicket: number;
  check: {
    admittedEvents: number;
    distinctAdmitted: number;
    admittedTwice: number;
    inFifoOrder: boolean;
    /** Where the admission order first departs from ticket order, if it does. */
    firstOutOfOrder: { index: number; ticket: string } | null;
    joined: number;
    passed: boolean;
  };
  before: ScaleSnapshot;
  afterCreate: ScaleSnapshot;
  after: ScaleSnapshot;
  auditEntries: number;
  /**
   * After the drain the object's clock moves past the longest retention window and its alarm
   * runs: the history is deleted, the memberships stay. Compared with a cluster that holds the
   * same members (adopted) and no history, swept the same way.
   */
  retention: {
    advancedSeconds: number;
    sweepMs: number;
    databaseSizeBytes: number;
    noHistoryDatabaseSizeBytes: number;
    ratio: number;
  };
}

/** Past every retention window (policy.ts), and one sweep interval more. */
const RETENTION_ADVANCE_MS =
  (Math.max(
    DEFAULT_RETENTION.auditSeconds,
    DEFAULT_RETENTION.endedTicketSeconds,
    DEFAULT_RETENTION.endedAdmissionSeconds,
    DEFAULT_RETENTION.endedEnrollmentTokenSeconds,
  ) +
    DEFAULT_RETENTION.sweepIntervalSeconds +
    60) *
  1000;

/**
 * Moves the cluster object's clock past the retention windows and runs its alarm; returns how long
 * the sweep took. Raw: these are the bench Worker's own routes, which the typed client has no call for.
 */
async function passRetention(http: HttpClient, cluster: string): Promise<number> {
  await http.expect([200], "GET", `/bench/clusters/${cluster}/advance?ms=${RETENTION_ADVANCE_MS}`);
  const began = performance.now();
  await http.expect([200], "GET", `/bench/clusters/${cluster}/alarm`);
  return performance.now() - began;
}

async function snapshot(http: HttpClient, broker: BrokerProcess, cluster: string): Promise<ScaleSnapshot> {
  const pid = broker.workerdPid();
  const memory = pid ? processMemory(pid) : null;
  const stats = (await http.expect([200], "GET", `/bench/clusters/${cluster}/stats`)).body as { databaseSize: number };
  return {
    workerdRssBytes: memory?.rssBytes ?? null,
    workerdPeakRssBytes: memory?.peakRssBytes ?? null,
    databaseSizeBytes: stats.databaseSize,
    sqliteFiles: durableObjectFiles(broker.persistDir),
  };
}

export async function queueScale(broker: BrokerProcess, options: { tickets: number; concurrency: number }): Promise<ScaleResult> {
  const http = new HttpClient(broker.url);
  try {
    const cluster: BenchCluster = await createCluster(http, broker, "scale");
    const before = await snapshot(http, broker, cluster.name);

    // Every node asks for its ticket; the first is the bootstrap ticket, admitted at once.
    const views = new Map<string, { ticket: string; admission?: string }>();
    const createStart = performance.now();
    const created: number[] = [];
    await pool(options.tickets, options.concurrency, async (i) => {
      const node = `node-${String(i).padStart(5, "0")}`;
      const view = (await requestTicket(cluster, node)).body;
      views.set(view.ticket, view);
      created.push(performance.now());
    });
    const createSeconds = (performance.now() - createStart) / 1000;
    log(`scale: ${options.tickets} tickets created in ${round(createSeconds, 1)} s`);
    const afterCreate = await snapshot(http, broker, cluster.name);

    // The driver guesses the next admitted ticket from the queue order: it long-polls that ticket
    // while it completes the current one, and falls back to asking the broker which ticket is in
    // flight when the guess is wrong. The check below reads the order from the audit log, not from
    // the driver.
    const queueOrder = (await allTickets(cluster)).map((t) => t.ticket);
    const placeInQueue = new Map(queueOrder.map((t, i) => [t, i]));
    const drainStart = performance.now();
    const drained: number[] = [];
    const requestsBefore = http.requests;
    let current: TicketRead | undefined = [...views.values()].map((v) => ({ state: "admitted", ...v })).find((v) => v.admission);
    if (!current?.admission) throw new Error("no ticket was admitted at once (expected the bootstrap ticket)");
    let memberID = 0x10000;
    const deadline = Date.now() + 20 * 60_000;
    for (let done = 0; done < options.tickets; done++) {
      if (Date.now() > deadline) throw new Error(`scale: draining took longer than 20 min (${done} of ${options.tickets} admitted)`);
      const last = done === options.tickets - 1;
      const guess: string | undefined = last ? undefined : queueOrder[(placeInQueue.get(current!.ticket) ?? -2) + 1];
      const polled: Promise<TicketRead | null> = guess ? readTicket(cluster, guess, 10) : Promise.resolve(null);
      await completeTicket(cluster, current!.ticket, current!.admission!, (memberID++).toString(16));
      drained.push(performance.now());
      let next: TicketRead | null = await polled;
      if (last) break;
      if (next?.state !== "admitted") {
        const inFlight = (await cluster.admin.status()).body.inFlight[0]?.ticket;
        if (!inFlight) throw new Error(`scale: nothing admitted after ${done + 1} completions`);
        next = await readTicket(cluster, inFlight, 0);
      }
      if (!next.admission) throw new Error(`scale: ticket ${next.ticket} is ${next.state} without an admission`);
      current = next;
      if ((done + 1) % 2000 === 0) log(`scale: ${done + 1} admitted and completed`);
    }
    const drainSeconds = (performance.now() - drainStart) / 1000;
    const drainRequests = http.requests - requestsBefore;
    const after = await snapshot(http, broker, cluster.name);
    // The check below reads the audit log and the ticket list, so they are read before retention.
    const audit = await allAudit(cluster);
    const tickets = await allTickets(cluster);

    const sweepMs = await passRetention(http, cluster.name);
    const swept = await snapshot(http, broker, cluster.name);
    // The same membership with no history: adopted 100 members a call (the route's limit).
    const reference = await createCluster(http, broker, "scale-nohistory");
    const members = tickets.map((t) => ({ node: t.node, peerURL: peerUrlOf(t.node) }));
    for (let i = 0; i < members.length; i += 100) await reference.admin.adopt(members.slice(i, i + 100));
    await passRetention(http, reference.name);
    const noHistory = await snapshot(http, broker, reference.name);
    const retention = {
      advancedSeconds: RETENTION_ADVANCE_MS / 1000,
      sweepMs: round(sweepMs, 1),
      databaseSizeBytes: swept.databaseSizeBytes,
      noHistoryDatabaseSizeBytes: noHistory.databaseSizeBytes,
      ratio: round(swept.databaseSizeBytes / noHistory.databaseSizeBytes, 2),
    };
    log(
      `scale: after the retention window the database is ${retention.databaseSizeBytes} bytes, ${retention.ratio}x a cluster with the same members and no history (sweep ${retention.sweepMs} ms)`,
    );

    // The check: the audit log's admissions, in log order, against the tickets in queue order.
    const admittedOrder = audit.filter((e) => e.action === "ticket.admitted").map((e) => e.subject);
    const seen = new Map<string, number>();
    for (const t of admittedOrder) seen.set(t, (seen.get(t) ?? 0) + 1);
    const fifo = tickets.map((t) => t.ticket);
    const firstDeparture = fifo.findIndex((t, i) => admittedOrder[i] !== t);
    const check = {
      admittedEvents: admittedOrder.length,
      distinctAdmitted: seen.size,
      admittedTwice: [...seen.values()].filter((n) => n > 1).length,
      inFifoOrder: firstDeparture === -1 && admittedOrder.length === fifo.length,
      firstOutOfOrder: firstDeparture === -1 ? null : { index: firstDeparture, ticket: admittedOrder[firstDeparture] ?? "(none)" },
      joined: tickets.filter((t) => t.state === "joined").length,
      passed: false,
    };
    check.passed =
      check.inFifoOrder &&
      check.admittedTwice === 0 &&
      check.distinctAdmitted === options.tickets &&
      check.joined === options.tickets &&
      tickets.length === options.tickets;
    log(
      `scale: drained in ${round(drainSeconds, 1)} s; FIFO ${check.inFifoOrder}, exactly once ${check.admittedTwice === 0 && check.distinctAdmitted === options.tickets}`,
    );
    return {
      tickets: options.tickets,
      concurrency: options.concurrency,
      createSeconds: round(createSeconds, 2),
      createdPerSecond: round(options.tickets / createSeconds, 1),
      createdPerSecondFirstTenth: tenthRate(createStart, created, "first"),
      createdPerSecondLastTenth: tenthRate(createStart, created, "last"),
      drainSeconds: round(drainSeconds, 2),
      admittedPerSecond: round(options.tickets / drainSeconds, 1),
      admittedPerSecondFirstTenth: tenthRate(drainStart, drained, "first"),
      admittedPerSecondLastTenth: tenthRate(drainStart, drained, "last"),
      drainRequestsPerTicket: round(drainRequests / options.tickets, 3),
      check,
      before,
      afterCreate,
      after,
      auditEntries: audit.length,
      retention,
    };
  } finally {
    http.close();
  }
}

interface TicketRead {
  ticket: string;
  state: string;
  admission?: string;
}

/** The node's view of its ticket; with `waitSeconds`, a long poll that returns once it leaves the queue. */
async function readTicket(cluster: BenchCluster, ticket: string, waitSeconds: number): Promise<TicketRead> {
  return (await cluster.nodes.ticket(ticket, waitSeconds > 0 ? waitSeconds : undefined)).body;
}

/** Events per second over the first or the last tenth of `times` (completion instants, in order). */
function tenthRate(start: number, times: number[], which: "first" | "last"): number {
  const tenth = Math.max(1, Math.floor(times.length / 10));
  if (times.length < 2) return NaN;
  const from = which === "first" ? start : times[times.length - tenth - 1]!;
  const to = which === "first" ? times[tenth - 1]! : times[times.length - 1]!;
  return round(tenth / ((to - from) / 1000), 1);
}

/** The SQLite files of the Durable Objects of class `JoinQueue` under the persist directory, with their sizes. */
function durableObjectFiles(persistDir: string): { path: string; bytes: number }[] {
  const out: { path: string; bytes: number }[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (/\.sqlite(-wal|-shm)?$/.test(entry.name) && path.includes("JoinQueue"))
        out.push({ path: path.slice(persistDir.length + 1), bytes: statSync(path).size });
    }
  };
  walk(persistDir);
  return out;
}
