import type { BrokeredBreakdown, JoinResult, JoinRun, JoinSummary, SerialBreakdown } from "./cluster-join.ts";
import type { ScaleResult } from "./queue-scale.ts";
import { k0sSection, k0sSummaryRows } from "./k0s-report.ts";
import { kubeadmMissedNotes, kubeadmSection, kubeadmSummaryRows } from "./kubeadm-report.ts";
import type { Results } from "./results.ts";
import { n, separateRunLine, table, yes } from "./support/format.ts";
import { median } from "./support/stats.ts";

export const TARGETS = {
  brokerRatio: 0.6,
  handoffP50Ms: 25,
  /** Its ticket, a poll the broker answers when the node becomes first in line, the poll its admission answers, its complete. */
  handoffRequestsPerNode: 4,
  verifierRatio: 0.8,
  joinRatio: 1.05,
  /** 1 + 6 with maxInFlight 6 on etcd 3.6+. */
  pipelinedRatio: 0.25,
  /** Database after the retention window over a cluster with the same members and no history. */
  retentionRatio: 3,
};

/** A join result's version and policy; results from before versions were measured ran Debian's 3.4 with maxInFlight 1. */
const etcdOf = (x: { etcd?: string }) => x.etcd ?? "3.4";
const mifOf = (x: { maxInFlight?: number }) => x.maxInFlight ?? 1;
const joinTarget = (x: { maxInFlight?: number }) => (mifOf(x) > 1 ? TARGETS.pipelinedRatio : TARGETS.joinRatio);
/** etcd's ports as a join result ran them; results from before TLS was measured ran plain http. */
const transportOf = (x: { tls?: boolean }) => (x.tls ? "TLS" : "plain http");

const INTRO = `# Benchmarks

Every speed figure here is measured beside its ceiling or baseline **in the same run on the same
machine**, and reported as a ratio to it: on a busy or slow machine both sides slow down together,
so the ratio carries over where the absolute numbers do not. Each figure is the median of several
runs. Benchmarks assert nothing about time (\`npm test\` stays fast and never runs them); a run fails
only if a benchmark cannot run or a correctness check inside it fails (FIFO order, exactly-once
admission, one etcd cluster).

    npm run bench              # full run (about an hour: the join on four etcd versions); writes bench/results.json and this file
    npm run bench -- --quick   # fewer, smaller runs (a few minutes)
    npm run bench -- --only broker,handoff,scale,verifier,join,executable   # some of them, written to bench/out/
    npm run bench -- --only join --merge --etcd 3.6,3.7   # the join on some etcd versions, written into bench/results.json
    npm run bench -- --only join --plain-http   # the join on plain-http etcd (by default etcd runs TLS with client certificates)
    npm run bench -- --only kubeadm --merge   # the real kubeadm through the gate (as root, with the Kubernetes builds), written into bench/results.json
    npm run bench -- --only k0s --merge   # real k0s 1.28 and 1.36 through the gate (as root, with the k0s builds), written into bench/results.json
    npm run bench -- --render  # rewrite this file from bench/results.json

Everything runs on 127.0.0.1. The broker runs under \`wrangler dev\` (workerd) with the bench
configuration \`bench/wrangler.bench.toml\`: the production app and Durable Object unchanged, plus a few
bench-only calls (a no-op RPC to the cluster's Durable Object, its database size, the object's log level
at run time). The load generator is one Node process with keep-alive connections and no socket limit.
`;

const int = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? "–" : Math.round(v).toLocaleString("en-US"));
const gib = (bytes: number) => `${n(bytes / 1024 ** 3)} GiB`;
const mb = (bytes: number | null | undefined) => (bytes === null || bytes === undefined ? "–" : `${n(bytes / (1024 * 1024))} MiB`);

function notMeasured(r: Results, section: string, what: string): string | null {
  if (r.errors[section]) return `${what}: **not measured** — the benchmark failed: \`${r.errors[section].split("\n")[0]}\``;
  // A section measured by a partial run merged into this one ran all the same.
  if (!r.sections.includes(section) && !r.merged?.some((m) => m.sections.includes(section))) return `${what}: not run in this run.`;
  return null;
}

/**
 * For each whole-cluster join row that missed its target: where the brokered run's extra time
 * went, step by step against the serial script's (the same breakdown as the section's table), and
 * what etcd said about both sides (snapshots sent, publish timeouts).
 */
function joinMissedNotes(r: Results): string[] {
  const j = r.join;
  if (!j) return [];
  return j.summary
    .filter((x) => !(x.ratio <= joinTarget(x)))
    .map((x) => {
      const mine = j.runs.filter((y) => etcdOf(y) === etcdOf(x) && mifOf(y) === mifOf(x) && y.n === x.n && y.tls === x.tls);
      const b = (k: keyof BrokeredBreakdown) => median(mine.map((y) => y.brokeredBreakdown[k] ?? NaN)) / 1000;
      const s = (k: keyof SerialBreakdown) => median(mine.map((y) => y.serialBreakdown[k] ?? NaN)) / 1000;
      const sum = (f: (y: JoinRun) => number | undefined) => mine.reduce((a, y) => a + (f(y) ?? 0), 0);
      const facts = (side: "brokered" | "serial") =>
        mine.some((y) => y[side].etcd)
          ? `${sum((y) => y[side].etcd?.snapshotsReceived)} snapshot(s) sent, ${sum((y) => y[side].etcd?.failedPublishes)} publish timeout(s), raft index ${median(mine.map((y) => y[side].etcd?.raftIndex ?? NaN))}`
          : "not recorded";
      const what = `etcd ${etcdOf(x)} on ${transportOf(x)}, 1 + ${x.n}${mifOf(x) > 1 ? ` (maxInFlight ${mifOf(x)})` : ""}`;
      const serialNode0 = median(mine.map((y) => y.serialBreakdown.processStartMs + y.serialBreakdown.firstNodeMs)) / 1000;
      const parts =
        mifOf(x) > 1
          ? `node 0 ready ${n(b("bootstrapMs"), 2)} (serial ${n(serialNode0, 2)}), adds one etcd start apart and then the promotions: the slowest joiner's catch-up ${n(b("slowestCatchUpMs"), 2)}, against the serial script's ${n(s("memberAddMs"), 2)} of health windows`
          : `process start ${n(b("processStartMs"), 2)} (serial ${n(s("processStartMs"), 2)}), node 0 ready ${n(b("bootstrapMs"), 2)} (serial ${n(serialNode0, 2)}), member adds ${n(b("memberAddMs"), 2)} (serial ${n(s("memberAddMs"), 2)}), etcd starts ${n(b("etcdStartMs"), 2)} (serial ${n(s("etcdStartMs"), 2)}), promote → voter ${n(b("promoteMs"), 2)} (serial ${n(s("promoteMs"), 2)}), reports to the broker ${n(b("completeMs") + b("handoffMs"), 2)}`;
      // The run that measured this row: the latest merged join run on its etcd version, else this one.
      const run =
        [...(r.merged ?? [])]
          .reverse()
          .find((m) => m.sections.includes("join") && ((m.settings as { join?: { versions?: string[] } }).join?.versions ?? []).includes(etcdOf(x))) ?? r;
      const delta = x.brokeredSeconds - x.serialSeconds;
      return `**${what}**: ${n(x.ratio, 2)}, target ≤ ${joinTarget(x)}: brokered ${n(x.brokeredSeconds, 2)} s against ${n(x.serialSeconds, 2)} s (${delta >= 0 ? "+" : "−"}${n(Math.abs(delta), 2)} s). ${parts}. etcd, brokered: ${facts("brokered")}; serial: ${facts("serial")} (over ${mine.length} run(s)). Load average ${run.loadAverage.start.join(" / ")} at the start of the run that measured it, ${run.loadAverage.end.join(" / ")} at its end.`;
    });
}

function summary(r: Results): string {
  const rows: string[][] = [];
  const b = r.broker?.summary;
  rows.push(
    b
      ? [
          "1",
          "Broker: ticket creations",
          `${n(b.ticketsPerSecond)}/s (p50 ${n(b.ticketsP50Ms)} ms, p99 ${n(b.ticketsP99Ms)} ms)`,
          `no-op DO RPC ${n(b.ceilingPerSecond)}/s (p50 ${n(b.ceilingP50Ms)} ms)`,
          n(b.ratio, 2),
          `≥ ${TARGETS.brokerRatio}`,
          yes(b.ratio >= TARGETS.brokerRatio),
        ]
      : ["1", "Broker: ticket creations", "not measured", "", "", `≥ ${TARGETS.brokerRatio}`, ""],
  );
  const h = r.handoff?.summary;
  rows.push(
    h
      ? [
          "2",
          `Queue hand-off, ${r.handoff!.nodes} long polls`,
          `p50 ${n(h.p50Ms)} ms, p99 ${n(h.p99Ms)} ms; ${n(h.requestsPerNode, 2)} requests per admitted node`,
          "–",
          "–",
          `p50 < ${TARGETS.handoffP50Ms} ms; ≤ ${TARGETS.handoffRequestsPerNode} requests`,
          yes(h.p50Ms < TARGETS.handoffP50Ms && h.requestsPerNode <= TARGETS.handoffRequestsPerNode),
        ]
      : ["2", "Queue hand-off", "not measured", "", "", `p50 < ${TARGETS.handoffP50Ms} ms; ≤ ${TARGETS.handoffRequestsPerNode} requests`, ""],
  );
  const sb = r.serve?.broker.summary;
  const sh = r.serve?.handoff.summary;
  rows.push(
    sb && sh
      ? [
          "1s",
          "join-broker serve: ticket creations; hand-off",
          `${n(sb.ticketsPerSecond)}/s (p50 ${n(sb.ticketsP50Ms)} ms); hand-off p50 ${n(sh.p50Ms)} ms, ${n(sh.requestsPerNode, 2)} requests per node`,
          `no-op DO RPC ${n(sb.ceilingPerSecond)}/s on the same runtime`,
          n(sb.ratio, 2),
          `≥ ${TARGETS.brokerRatio}; p50 < ${TARGETS.handoffP50Ms} ms`,
          yes(sb.ratio >= TARGETS.brokerRatio && sh.p50Ms < TARGETS.handoffP50Ms && sh.requestsPerNode <= TARGETS.handoffRequestsPerNode),
        ]
      : ["1s", "join-broker serve", "not measured", "", "", `≥ ${TARGETS.brokerRatio}; p50 < ${TARGETS.handoffP50Ms} ms`, ""],
  );
  const s = r.scale;
  rows.push(
    s
      ? [
          "3",
          `Queue scale, ${int(s.tickets)} tickets`,
          `FIFO: ${s.check.inFifoOrder ? "yes" : "no"}, exactly once: ${s.check.admittedTwice === 0 && s.check.distinctAdmitted === s.tickets ? "yes" : "no"}; database ${mb(s.after.databaseSizeBytes)}${s.retention ? `, ${mb(s.retention.databaseSizeBytes)} after the retention window` : ""}; workerd RSS ${mb(s.before.workerdRssBytes)} → ${mb(s.after.workerdRssBytes)}`,
          s.retention ? `same members, no history: ${mb(s.retention.noHistoryDatabaseSizeBytes)}` : "–",
          s.retention ? n(s.retention.ratio, 2) : "–",
          `all admitted, FIFO, exactly once; retained ≤ ${TARGETS.retentionRatio}× no history`,
          yes(s.check.passed && (!s.retention || s.retention.ratio <= TARGETS.retentionRatio)),
        ]
      : ["3", "Queue scale", "not measured", "", "", "all admitted, FIFO, exactly once", ""],
  );
  const v = r.verifier?.summary;
  rows.push(
    v
      ? [
          "4",
          "Verifier: verifyAdmission (warm JWKS)",
          `${int(v.verifyAdmissionPerSecond)} ops/s`,
          `jose jwtVerify, local key set: ${int(v.joseJwtVerifyPerSecond)} ops/s`,
          n(v.ratio, 2),
          `≥ ${TARGETS.verifierRatio}`,
          yes(v.ratio >= TARGETS.verifierRatio),
        ]
      : ["4", "Verifier", "not measured", "", "", `≥ ${TARGETS.verifierRatio}`, ""],
  );
  if (r.join) {
    for (const j of r.join.summary) {
      const what = `Whole-cluster join, etcd ${etcdOf(j)} on ${transportOf(j)}, 1 + ${j.n}${mifOf(j) > 1 ? `, maxInFlight ${mifOf(j)} (pipelined)` : ""}`;
      const floor = j.floorSeconds !== undefined ? ` (floor ${n(j.floorSeconds, 2)} s)` : "";
      rows.push([
        "5",
        what,
        `${n(j.brokeredSeconds, 2)} s${floor}`,
        `serial script ${n(j.serialSeconds, 2)} s`,
        n(j.ratio, 2),
        `≤ ${joinTarget(j)}×`,
        yes(j.ratio <= joinTarget(j)),
      ]);
    }
  } else {
    rows.push(["5", "Whole-cluster join", "not measured", "", "", `≤ ${TARGETS.joinRatio}×`, ""]);
  }
  const c = r.catchup;
  if (c) {
    const long = c.rows.filter((x) => x.writes > 100 && ["3.6", "3.7"].includes(x.etcd));
    const stalled = long.reduce((a, x) => a + x.stalled, 0);
    const trials = long.reduce((a, x) => a + x.trials, 0);
    const own = long.reduce((a, x) => a + x.stalledWithOwnPublishInSnapshot, 0);
    const short = c.rows.filter((x) => x.writes <= 100 && ["3.6", "3.7"].includes(x.etcd));
    rows.push([
      "5e",
      "etcd alone: a new member on a raft log past 100 entries (3.6, 3.7)",
      `${stalled} of ${trials} published only after etcd's request timeout; ${own} of them held their own publish in their snapshot`,
      `on a short log: ${short.reduce((a, x) => a + x.stalled, 0)} of ${short.reduce((a, x) => a + x.trials, 0)}`,
      "–",
      "–",
      "–",
    ]);
  }
  const e = r.executable;
  rows.push(
    e
      ? [
          "6",
          `Single executable file: an agent's start-up, ${e.agents} at once`,
          `${int(e.summary.executableMs)} ms; file ${mb(e.sizes.x64Bytes)} (x64)`,
          `npm form (bin/join-broker, same machine): ${int(e.summary.npmMs)} ms`,
          n(e.summary.ratio, 2),
          "–",
          "–",
        ]
      : ["6", "Single executable file", "not measured", "", "", "–", ""],
  );
  const f = r.footprint;
  rows.push(
    f
      ? [
          "7",
          `Memory (RSS): serve with ${f.clusters} clusters; a queued agent; the join API`,
          `${n(f.summary.serveLoadedMiB, 1)} MiB; ${n(f.summary.agentMiB, 1)} MiB; ${n(f.summary.joinApiMiB, 1)} MiB`,
          `serve with one cluster: ${n(f.summary.serveIdleMiB, 1)} MiB`,
          "–",
          "–",
          "–",
        ]
      : ["7", "Memory (RSS)", "not measured", "", "", "–", ""],
  );
  rows.push(...kubeadmSummaryRows(r));
  rows.push(...k0sSummaryRows(r));
  const notes = [...joinMissedNotes(r), ...kubeadmMissedNotes(r)];
  return `${table(["#", "Benchmark", "Figure", "Ceiling / baseline (same run)", "Ratio", "Target", "Met"], rows)}${notes.length ? `\n\nWhy each missed target was missed, measured in the same runs (medians; seconds):\n\n${notes.map((x) => `- ${x}`).join("\n")}` : ""}`;
}

function serveSection(r: Results): string {
  const missing = notMeasured(r, "serve", "join-broker serve");
  if (missing || !r.serve) return `## 1s. The same on join-broker serve\n\n${missing ?? "Not measured."}\n`;
  const sb = r.serve.broker;
  const sh = r.serve.handoff;
  const wb = r.serve.besideWrangler?.broker;
  const wh = r.serve.besideWrangler?.handoff;
  const cell = (v: number | undefined, digits = 0) => (v === undefined ? "not run" : n(v, digits));
  return `## 1s. The same on join-broker serve

Benchmarks 1 and 2 again, with the bench Worker started the way \`join-broker serve\` starts the
broker (\`src/node/serve/start.ts\`: workerd from the \`workerd\` npm package, the serve
configuration with SQLite on local disk, the local \`AUTH_FAILURES\` limiter, no wrangler and
no proxy in front), in a process of its own, with its own no-op ceiling on that runtime. Same
settings, same phases, same clients. The wrangler dev column is benchmarks 1 and 2 of the same
run${r.serve.besideWrangler && r.serve.besideWrangler.date !== r.date ? ` (${r.serve.besideWrangler.date.slice(0, 16).replace("T", " ")} UTC, \`--only broker,handoff,serve\`)` : ""}.

${table(
  ["Figure", "join-broker serve", "wrangler dev (same run)"],
  [
    ["No-op DO RPC (ceiling), per second", n(sb.summary.ceilingPerSecond), cell(wb?.ceilingPerSecond)],
    ["Ticket creations per second", `**${n(sb.summary.ticketsPerSecond)}**`, cell(wb?.ticketsPerSecond)],
    ["Ratio to the ceiling of its own runtime", `**${n(sb.summary.ratio, 2)}**`, cell(wb?.ratio, 2)],
    [
      "Ticket creation p50 / p99 ms",
      `${n(sb.summary.ticketsP50Ms)} / ${n(sb.summary.ticketsP99Ms)}`,
      wb ? `${n(wb.ticketsP50Ms)} / ${n(wb.ticketsP99Ms)}` : "not run",
    ],
    ["Ticket creations, LOG_LEVEL=debug, per second", n(sb.summary.ticketsAllLoggedPerSecond), cell(wb?.ticketsAllLoggedPerSecond)],
    [
      `Hand-off p50 / p99 ms (${sh.nodes} long polls)`,
      `**${n(sh.summary.p50Ms)}** / ${n(sh.summary.p99Ms)}`,
      wh ? `${n(wh.p50Ms)} / ${n(wh.p99Ms)}` : "not run",
    ],
    ["Requests per admitted node", n(sh.summary.requestsPerNode, 2), cell(wh?.requestsPerNode, 2)],
  ],
)}

Runs: ${sb.runs.map((x) => `${n(x.tickets.perSecond)}/s vs ceiling ${n(x.ceiling.perSecond)}/s`).join("; ")}; hand-off p50 per run ${sh.runs.map((x) => `${n(x.p50Ms)} ms`).join(", ")}.

**Where the time goes on serve** (a one-off check, \`--only serve\`, 2026-12-01, the data
directory on tmpfs instead of the ext4 disk, everything else the same): ticket creations median
1,471/s against a ceiling of 3,057/s, ratio **0.51** (runs 0.28, 0.08, 0.68, 0.61, 0.51), and a
hand-off p50 of **1.3 ms** instead of 7 ms. Most of what separates a ticket from the no-op ceiling
on serve is the durable commit: every state change is a SQLite write committed to local disk
before the broker answers (what lets \`kill -9\` lose nothing), and the tmpfs run shows the
disk's share of it; a no-op RPC writes nothing. On
wrangler dev the same cost hides behind its much lower ceiling (its proxy in front of workerd).
The ceiling itself varies from run to run by a factor of two or more on this shared machine,
which is why every figure stands beside its own.
`;
}

function brokerSection(r: Results): string {
  const missing = notMeasured(r, "broker", "Broker throughput");
  if (missing || !r.broker) return `## 1. Broker throughput and latency\n\n${missing ?? "Not measured."}\n`;
  const b = r.broker;
  return `## 1. Broker throughput and latency

${b.concurrency} concurrent clients, ${int(b.requestsPerPhase)} requests per phase. **Ticket creations**:
\`POST /v1/clusters/{cluster}/tickets\` with an enrollment token, each for a new node, into one
cluster's queue (the first ticket is the bootstrap ticket, every other one queues). **Ceiling**:
\`GET /bench/clusters/{cluster}/ping\`, one RPC round trip to a cluster's Durable Object that does
nothing, through the same \`wrangler dev\` process (its proxy, the Worker, the object). Every phase
gets a fresh cluster, warmed with pings and tickets, so all meet the same queue depth. The broker
runs with its default \`LOG_LEVEL\` (info), at which a new ticket is a debug line and is not logged
(its audit row is written all the same). For information, a third phase creates tickets with
\`LOG_LEVEL=debug\`, one structured log line per ticket: under \`wrangler dev\` each line goes through
workerd's tail stream to wrangler's local collector and is printed by wrangler, on the same two cores.
The phases take turns in chunks of 250 requests, in rotating order, so that load from elsewhere
on the shared machine falls on all of them alike; each phase's rate is its requests over the time
its chunks took. Per-second figures and ratios are medians of the per-run figures; p50/p99 are
taken over the pooled samples of all runs.

${table(
  ["Run", "Turns", "Tickets/s", "p50 ms", "p99 ms", "Ceiling/s", "p50 ms", "p99 ms", "Ratio", "Tickets/s, every change logged", "Ratio"],
  b.runs.map((x) => [
    x.run + 1,
    x.order,
    n(x.tickets.perSecond),
    n(x.tickets.p50Ms),
    n(x.tickets.p99Ms),
    n(x.ceiling.perSecond),
    n(x.ceiling.p50Ms),
    n(x.ceiling.p99Ms),
    n(x.ratio, 3),
    n(x.ticketsAllLogged?.perSecond),
    n(x.ratioAllLogged, 3),
  ]),
)}

Median: **${n(b.summary.ticketsPerSecond)} tickets/s** against a ceiling of ${n(b.summary.ceilingPerSecond)}/s: ratio **${n(b.summary.ratio, 2)}** (target ≥ ${TARGETS.brokerRatio}).
With every change logged (\`LOG_LEVEL=debug\`): ${n(b.summary.ticketsAllLoggedPerSecond)} tickets/s, ratio ${n(b.summary.ratioAllLogged, 2)}.
Pooled latency: tickets p50 ${n(b.summary.ticketsP50Ms)} ms, p99 ${n(b.summary.ticketsP99Ms)} ms; ceiling p50 ${n(b.summary.ceilingP50Ms)} ms, p99 ${n(b.summary.ceilingP99Ms)} ms
(closed loop: each client sends its next request when the last one returns, so latency is mostly
queueing behind the other ${b.concurrency - 1} clients).

**Where a ticket creation's time goes** (one-off cut-off experiments, \`--only broker\`, 2026-11-30,
the object's \`requestTicket\` answering a fixed queued view early at each point; medians of 5 runs,
ratios to the ceiling of the same run, measured before the last two changes below): answering as
soon as the call reaches the object (the Worker, validation and the RPC itself), 0.88; after
authentication and the reads that decide the ticket, 0.81; the whole request, 0.64. The write is
the largest step: the ticket and its audit row in one transaction, and the commit, since a Durable
Object answers only once its writes are stored (its output gate) and a node must never hear of a
ticket that could still be lost, while the no-op ceiling writes nothing. What made the figure:
- The object is its database's only writer, so the store keeps what every ticket request needs in
  memory (queued and admitted counts, the highest seq, the earliest lease end, the enrollment tokens
  already seen with their use counts), updated by the writes themselves: no lease query when no
  lease is due, no admission run when no slot is free, no count for the newest ticket's position.
- A new ticket is 3 SQL statements: one read that finds no live ticket and no membership (and
  returns no row: building a row object costs more than the query), the ticket insert (a trigger
  counts the enrollment token's use), the audit row. Under \`wrangler dev\` every statement is also
  a trace span sent to wrangler's local collector.
- A new ticket is a debug log line, not written at the default \`LOG_LEVEL\`: a log line per ticket
  costs about as much again under \`wrangler dev\` (the third phase).

The absolute rate, hundreds of tickets per second into one cluster's queue, is far above what a
fleet of controllers joining one cluster asks for.
`;
}

function handoffSection(r: Results): string {
  const missing = notMeasured(r, "handoff", "Queue hand-off");
  if (missing || !r.handoff) return `## 2. Queue hand-off\n\n${missing ?? "Not measured."}\n`;
  const h = r.handoff;
  return `## 2. Queue hand-off

Policy maxInFlight 1. The bootstrap node holds the slot while ${h.nodes} nodes request tickets and
then wait in long polls (\`GET …/tickets/{ticket}?wait=${h.waitSeconds}\`, polled again if one ends with the
ticket still queued, Retry-After honoured on 429/503), all open at once (the client has no
connection limit; "max open" below is the count it held at the same moment). Each node completes
the moment it holds its admission token, so the queue drains as fast as the broker hands the slot
on. **Hand-off** = from sending \`complete\` for one node to the next node's long poll returning with
its admission token. **Requests per admitted node** counts every broker request a node made: its
ticket request, its polls, its \`complete\`. An admission answers the poll of the new first in line
(so that it shows "next" and is polling when its own admission comes; the node agent polls again
at once), nobody else's: four requests a node, one held poll at a time. p50/p99 over the pooled samples of all runs (medians of
per-run figures beside them); requests per node is the median of the runs.

${table(
  ["Run", "p50 ms", "p90 ms", "p99 ms", "max ms", "Requests/node", "Polls/node", "First ¼ / last ¼ of queue", "Longest wait s", "Max open polls"],
  h.runs.map((x) => [
    x.run + 1,
    n(x.p50Ms),
    n(x.p90Ms),
    n(x.p99Ms),
    n(x.maxMs),
    n(x.requestsPerNode, 2),
    n(x.pollsPerNode, 2),
    `${n(x.requestsPerNodeFirstQuarter, 2)} / ${n(x.requestsPerNodeLastQuarter, 2)}`,
    n(x.longestWaitSeconds),
    x.maxConcurrentPolls,
  ]),
)}

Pooled: hand-off **p50 ${n(h.summary.p50Ms)} ms, p99 ${n(h.summary.p99Ms)} ms** (median of per-run p50 ${n(h.summary.medianRunP50Ms)} ms, p99 ${n(h.summary.medianRunP99Ms)} ms);
**${n(h.summary.requestsPerNode, 2)} requests per admitted node** (targets: p50 < ${TARGETS.handoffP50Ms} ms, ≤ ${TARGETS.handoffRequestsPerNode} requests). Nodes at the back
of the queue, which wait longest, make as many requests as those at the front: the count does not
grow with the wait as long as the wait stays under the long-poll limit (${h.waitSeconds} s per poll).
`;
}

function scaleSection(r: Results): string {
  const missing = notMeasured(r, "scale", "Queue scale");
  if (missing || !r.scale) return `## 3. Queue scale\n\n${missing ?? "Not measured."}\n`;
  const s = r.scale;
  const files = (snap: ScaleResult["before"]) =>
    s && snap.sqliteFiles.filter((f) => !f.path.endsWith("metadata.sqlite") && !f.path.includes("metadata.sqlite-")).reduce((t, f) => t + f.bytes, 0);
  const quick = r.mode === "quick" ? `\n*Quick mode: ${int(s.tickets)} tickets instead of 10,000.*\n` : "";
  return `## 3. Queue scale
${quick}
${int(s.tickets)} nodes request tickets in one cluster (${s.concurrency} concurrent clients; default
maxInFlight 1, maxQueue raised to hold them all), then the queue drains one admission at a time:
the admitted node completes, the next is admitted (the driver long-polls the next ticket while it
completes the current one). The check reads the broker's own records: the
\`ticket.admitted\` entries of the audit log, in log order, must be the tickets in queue (seq) order,
each exactly once, and every ticket must end \`joined\`. It runs on a broker process of its own, one
run (it is a capacity and correctness figure, not a ratio).

${table(
  ["Check", "Result"],
  [
    ["Tickets created / joined", `${int(s.tickets)} / ${int(s.check.joined)}`],
    ["Admissions in the audit log (distinct)", `${int(s.check.admittedEvents)} (${int(s.check.distinctAdmitted)})`],
    ["Admitted more than once", int(s.check.admittedTwice)],
    ["Admitted in FIFO order", s.check.inFifoOrder ? "yes" : `**no** (first departure at #${s.check.firstOutOfOrder?.index})`],
    ["Passed", yes(s.check.passed)],
  ],
)}

${table(
  ["Phase", "Seconds", "Per second (all)", "First tenth", "Last tenth"],
  [
    ["Create tickets", n(s.createSeconds), n(s.createdPerSecond), n(s.createdPerSecondFirstTenth), n(s.createdPerSecondLastTenth)],
    [
      `Drain (complete, next; ${n(s.drainRequestsPerTicket, 2)} requests each)`,
      n(s.drainSeconds),
      n(s.admittedPerSecond),
      n(s.admittedPerSecondFirstTenth),
      n(s.admittedPerSecondLastTenth),
    ],
  ],
)}

${table(
  ["", "Before", "After creating", "After draining"],
  [
    ["Durable Object database (`sql.databaseSize`)", mb(s.before.databaseSizeBytes), mb(s.afterCreate.databaseSizeBytes), mb(s.after.databaseSizeBytes)],
    ["Its SQLite files on disk (db + WAL + shm)", mb(files(s.before)), mb(files(s.afterCreate)), mb(files(s.after))],
    ["workerd RSS (VmRSS)", mb(s.before.workerdRssBytes), mb(s.afterCreate.workerdRssBytes), mb(s.after.workerdRssBytes)],
    ["workerd peak RSS (VmHWM)", mb(s.before.workerdPeakRssBytes), mb(s.afterCreate.workerdPeakRssBytes), mb(s.after.workerdPeakRssBytes)],
  ],
)}
${
  s.retention
    ? `
Retention: the object's clock (its time seam) then moves ${n(s.retention.advancedSeconds / 86_400, 1)} days ahead, past every
retention window, and its alarm runs (the sweep took ${n(s.retention.sweepMs)} ms). The history (ended tickets and
admissions, the audit log) is deleted and the ${int(s.tickets)} memberships stay: the database is then
${mb(s.retention.databaseSizeBytes)}, ${n(s.retention.ratio, 2)}× the ${mb(s.retention.noHistoryDatabaseSizeBytes)} of a cluster that adopted the same members and has no history.
`
    : ""
}
Storage is the object's SQLite database: the size it reports itself and its files under the
\`--persist-to\` directory (\`v3/do/<script>-JoinQueue/<id>.sqlite*\`; the WAL holds pages not yet
checkpointed). Memory is the resident set of the workerd process that runs the Worker and its
Durable Objects (wrangler dev runs a second, proxy workerd in front; it is not counted): workerd
reports no per-object memory, so this is an upper bound that includes the runtime, the isolate's
heap before garbage collection and SQLite's page cache. The audit log holds ${int(s.auditEntries)} entries.

Where the growth is (a one-off check, 2026-11-30): the broker's own JavaScript heap, read through
the inspector after about 9,000 ticket creations, was 18 MiB used of 37 MiB, so the growth is
native memory in workerd, not objects the broker keeps. wrangler's local observability collector
(a Worker inside the same workerd that keeps every invocation and trace span for wrangler's local
dashboard) accounts for part of it: with \`X_LOCAL_OBSERVABILITY=false\` the same 10,000 tickets took
workerd from 139 to 502 MiB instead of 141 to 678 MiB. The rest was not attributed further
(SQLite's page cache, the allocator's free lists and the RPC machinery are candidates); the object
holds no per-ticket memory (waiters are removed when answered, key caches are per kid, the cached
counts are numbers).
`;
}

function verifierSection(r: Results): string {
  const missing = notMeasured(r, "verifier", "Verifier");
  if (missing || !r.verifier) return `## 4. Verifier\n\n${missing ?? "Not measured."}\n`;
  const v = r.verifier;
  return `## 4. Verifier

One real join admission token from the bench broker. **verifyAdmission**: the join API's check —
signature with the cluster's key (the JWKS fetched once from the broker, then served from jose's
cache), pinned alg/typ/iss/aud, exp/nbf, required claims, binding to node and peer URL — with
\`activeCheck: "none"\`. **Ceiling**: bare jose \`jwtVerify(token, createLocalJWKSet(jwks))\` with no claim
options. Per run, each runs for ${v.secondsPerLoop} s in one process, the two interleaved in 50 ms slices so that both
meet the same load on a shared machine; ops/s and the ratio are medians of the runs.

${table(
  ["Run", "Slices", "verifyAdmission ops/s", "jose jwtVerify ops/s", "Ratio"],
  v.runs.map((x) => [x.run + 1, x.order, int(x.verifyAdmissionPerSecond), int(x.joseJwtVerifyPerSecond), n(x.ratio, 3)]),
)}

Median ratio **${n(v.summary.ratio, 2)}** (target ≥ ${TARGETS.verifierRatio}). For information: with the default activeness check, each call also
asks the broker (\`POST …/admissions/introspect\`), which makes it a network round trip:
${int(v.withIntrospection.perSecond)} calls/s sequentially here (p50 ${n(v.withIntrospection.p50Ms)} ms), bounded by the broker, not by verification.
`;
}

function joinSection(r: Results): string {
  const missing = notMeasured(r, "join", "Whole-cluster join");
  if (missing || !r.join) return `## 5. Whole-cluster join\n\n${missing ?? "Not measured."}\n`;
  const j = r.join;
  const measured = r.merged?.filter((m) => m.sections.includes("join")) ?? [];
  const releases = j.versions?.map((v) => `${v.minor} (${v.release})`).join(", ") ?? String(r.machine.etcd);
  const groups = [...new Set(j.runs.map((x) => `${etcdOf(x)}|${mifOf(x)}`))].map((k) => {
    const [etcd, mif] = k.split("|");
    return { etcd: etcd!, mif: Number(mif) };
  });
  const sec = (ms: number) => n(ms / 1000, 2);
  return `## 5. Whole-cluster join

${measured
  .map((m) => {
    const js = (m.settings as { join?: { versions?: string[] } }).join;
    return `etcd ${js?.versions?.join(", ") ?? "?"}: measured on ${m.date.slice(0, 16).replace("T", " ")} UTC by a separate run (\`npm run bench -- --only ${m.sections.join(",")} --merge --etcd ${js?.versions?.join(",") ?? "?"}${m.mode === "quick" ? " --quick" : ""}\`, ${m.durationSeconds} s, commit ${m.machine.commit}; settings ${JSON.stringify(js)}; load average ${m.loadAverage.start.join(" / ")} at its start, ${m.loadAverage.end.join(" / ")} at its end), not by the run above.\n\n`;
  })
  .join("")}**Brokered**: 1 + N controllers, each a node agent process (\`join-broker join --etcd-bin …\`, starting
and supervising its own etcd; the package's command runs the built CLI, as installed), started at the same moment against the bench broker and one
reference join API (\`join-broker controller\`, already running, as the broker is); timed until the
last agent prints \`joined cluster … as …\` (it is a voter and has reported to the broker). **Serial
baseline**: the best serial script a careful operator could run by hand against the same etcd
binary and flags (bench/serial-join.ts, one process): start node 0 as a new cluster, then per node
\`member add --learner\`, start etcd \`existing\`, wait until it serves, promote (retried every 100 ms
while etcd says "not yet"), wait until it is a voter, next; timed from its start until it prints
\`all voters\`. Both are checked afterwards: one cluster of 1 + N voters (and one bootstrap among the
agents). Both sides of a row run the same etcd binary, in the same run: etcd ${releases}. Each
size runs several times, the side that goes first alternating; a row's ratio is the median of its
runs' ratios. 1 + 2 runs nine times, the others three: a new single-member etcd elects itself after
0.1 to 1 s (etcd's randomized election timeout), drawn anew on each side of each run, and in the
shortest join that draw is most of the spread between runs.

${transportText(j)}

**Where the time goes.** etcd refuses a membership change until its leader has been connected to
enough voters for 5 s (the health window; 3.4/3.5: every voter; 3.6+: a quorum of the voters plus
the new member, and no wait at all while there is a single voter). A serial join changes the voters
after every node, so from the second joiner on each add waits out most of a window: N joins cost
about N − 1 windows plus N etcd starts and catch-ups, on every version, and the broker with
\`maxInFlight\` 1 can only match that. Its extra cost is mostly fixed per join (see "Node 0
ready": 1 + N agent processes starting at once on the same cores, the ticket, the bootstrap
reported to the broker before the first joiner is admitted) plus a little per node (a
hand-off, a \`complete\`); it weighs most where the serial script is short: 1 + 2, and etcd
3.6+, where the first joiner pays no window and every other add is let through at once (a
quorum of the voters, counted from when the newest voter started, is enough). The hand-off
stays off the critical path: the node first in line holds a poll at the broker (an admission
wakes the new first in line, which polls again at once), so its admission reaches it within
milliseconds of the previous \`complete\`, and its member add then waits in the join API for
the window, retried every 50 ms (the serial script's every 100 ms). Node 0's agent makes its
keys while it asks for its ticket and a joiner while it waits in the queue, the join API signs
a joiner's certificates while etcd adds it, and the learner records cost etcd one write per
joiner, after its add (docs/join-api.md). **Pipelined** (etcd 3.6+, \`maxInFlight\` M, the agents start etcd with \`--max-learners\` M):
the broker admits M nodes at once, the join API adds them as learners while the only voter is node 0
(one etcd start apart, since a joining etcd checks the member list it was given), promotions wait
for those adds and then follow back to back. So no health window is paid after node 0 is up, and
the join approaches its floor: node 0 ready + one health window + the slowest joiner's catch-up
(etcd start → voter), reported as "floor". From a single voter etcd 3.6+ skips the window, so
the runs come in below that floor; the figure in brackets is the floor without the window (node 0
ready + slowest catch-up), which the pipelined runs approach: what is left above it is the adds
following each other one etcd start apart and the promotions in turn.

${table(
  [
    "etcd",
    "maxInFlight",
    "1 + N",
    "Run",
    "Order",
    "Brokered s",
    "Serial s",
    "Ratio",
    "Voters (brokered / serial)",
    "Serial retries (add / promote)",
    "Raft index (brokered / serial)",
    "Snapshots sent; publish timeouts (brokered / serial)",
  ],
  j.runs.map((x) => [
    etcdOf(x),
    mifOf(x),
    x.n,
    x.run + 1,
    x.order,
    n(x.brokeredSeconds, 2),
    n(x.serialSeconds, 2),
    n(x.ratio, 3),
    `${x.brokered.voters} / ${x.serial.voters}`,
    `${x.serial.addRetries} / ${x.serial.promoteRetries}`,
    x.brokered.etcd && x.serial.etcd ? `${x.brokered.etcd.raftIndex} / ${x.serial.etcd.raftIndex}` : "–",
    x.brokered.etcd && x.serial.etcd
      ? `${x.brokered.etcd.snapshotsReceived}; ${x.brokered.etcd.failedPublishes} / ${x.serial.etcd.snapshotsReceived}; ${x.serial.etcd.failedPublishes}`
      : "–",
  ]),
)}

${table(
  ["etcd", "etcd ports", "maxInFlight", "1 + N", "Brokered s", "Serial s", "Ratio", "Target", "Floor s (without the window)"],
  j.summary.map((x) => {
    const mine = j.runs.filter((r) => etcdOf(r) === etcdOf(x) && mifOf(r) === mifOf(x) && r.n === x.n);
    const bare = median(mine.map((r) => (r.brokeredBreakdown.bootstrapMs + (r.brokeredBreakdown.slowestCatchUpMs ?? NaN)) / 1000));
    return [
      `${etcdOf(x)}${x.release ? ` (${x.release})` : ""}`,
      transportOf(x),
      mifOf(x),
      x.n,
      n(x.brokeredSeconds, 2),
      n(x.serialSeconds, 2),
      `**${n(x.ratio, 2)}**`,
      `≤ ${joinTarget(x)}`,
      x.floorSeconds !== undefined ? `${n(x.floorSeconds, 2)} (${n(bare, 2)})` : "–",
    ];
  }),
)}

"Raft index" is the leader's at the end (every entry: membership changes, publishes, elections,
the join API's learner records), "snapshots sent" and "publish timeouts" are counted in every
member's own etcd log ("received and saved database snapshot", "failed to publish local member
to cluster through raft"): counts that load does not move. Below 100 entries etcd 3.6+ sends no
member a snapshot, so no member can meet the 7 s publish stall of section 5e.

${otherTransportText(j)}Where the time goes (median of the runs, in seconds; "Node 0 ready" counts from the start, the
per-node steps are summed over the N joining nodes, so for pipelined runs, where nodes overlap, they
add up to more than the wall time; "Slowest catch-up" is the slowest joiner's etcd start → voter).
Brokered figures come from the agents' own progress events (\`--log-format json\`), serial ones
from the script's clock.

${table(
  [
    "etcd",
    "maxInFlight",
    "1 + N",
    "Side",
    "Process start",
    "Node 0 ready",
    "Broker hand-offs",
    "Member add (503s)",
    "etcd start",
    "Promote → voter",
    "Complete",
    "Slowest catch-up",
  ],
  groups.flatMap(({ etcd, mif }) =>
    j.sizes.flatMap((size) => {
      const mine = j.runs.filter((x) => etcdOf(x) === etcd && mifOf(x) === mif && x.n === size && x.brokeredBreakdown && x.serialBreakdown);
      if (mine.length === 0) return [];
      const b = (k: keyof JoinRun["brokeredBreakdown"]) => median(mine.map((x) => x.brokeredBreakdown[k] ?? NaN));
      const s = (k: keyof JoinRun["serialBreakdown"]) => median(mine.map((x) => x.serialBreakdown[k] ?? NaN));
      return [
        [
          etcd,
          mif,
          size,
          "brokered",
          sec(b("processStartMs")),
          sec(b("bootstrapMs")),
          mif > 1 ? "–" : sec(b("handoffMs")),
          `${sec(b("memberAddMs"))} (${int(b("memberAddRetries"))})`,
          sec(b("etcdStartMs")),
          sec(b("promoteMs")),
          sec(b("completeMs")),
          sec(b("slowestCatchUpMs")),
        ],
        [
          etcd,
          mif,
          size,
          "serial",
          sec(s("processStartMs")),
          sec(median(mine.map((x) => x.serialBreakdown.processStartMs + x.serialBreakdown.firstNodeMs))),
          "–",
          sec(s("memberAddMs")),
          sec(s("etcdStartMs")),
          sec(s("promoteMs")),
          "–",
          "–",
        ],
      ];
    }),
  ),
)}
`;
}

/** How etcd ran in these runs: TLS as production runs it, or plain http. */
function transportText(j: JoinResult): string {
  const kinds = new Set(j.runs.map(transportOf));
  const tls = `**etcd on TLS**, as production runs it: TLS and client-certificate auth on the client and
peer ports of every member, on both sides, with one operator CA per run (made before the clock
starts). Brokered: the CA in every node's \`--pki-dir\`; the node the broker lets bootstrap signs
its own certificates, each joiner makes its keys and sends certificate requests with its member
add, and the join API (\`--pki-dir\` with the CA, and a client certificate of its own) signs them.
Serial: the script signs each node's peer and server certificates itself before it adds the node
(an operator with the CA at hand; timed), starts etcd with them, and asks etcd with a client
certificate. Every etcd client, the bench's own check included, presents a certificate of the CA.`;
  const plain = "**etcd on plain http** (`--plain-http`): no TLS on either side.";
  if (kinds.size > 1) return `${tls}\n\nRows marked plain http were measured without TLS (an earlier run or \`--plain-http\`); see "etcd ports".`;
  return kinds.has("TLS") ? tls : plain;
}

/** The rows these replaced on the other transport, side by side: what TLS costs. */
function otherTransportText(j: JoinResult): string {
  const other = j.otherTransport;
  if (!other) return "";
  const pairs = j.summary.flatMap((x) => {
    const y = other.summary.find((o) => etcdOf(o) === etcdOf(x) && mifOf(o) === mifOf(x) && o.n === x.n && transportOf(o) !== transportOf(x));
    return y ? [{ tls: x.tls ? x : y, http: x.tls ? y : x }] : [];
  });
  if (!pairs.length) return "";
  const pct = (a: number, b: number) => `${a >= b ? "+" : ""}${n(((a - b) / b) * 100, 0)} %`;
  const sequential = pairs.filter((p) => mifOf(p.tls) === 1);
  const pipelined = pairs.filter((p) => mifOf(p.tls) > 1);
  const medianOf = (xs: typeof pairs, f: (p: (typeof pairs)[number]) => number) => median(xs.map(f));
  const line = (xs: typeof pairs, label: string) =>
    xs.length
      ? `${label}: the brokered join ${pct(
          medianOf(xs, (p) => p.tls.brokeredSeconds / p.http.brokeredSeconds),
          1,
        )} (median ${n(
          medianOf(xs, (p) => p.tls.brokeredSeconds - p.http.brokeredSeconds),
          2,
        )} s), the serial script ${pct(
          medianOf(xs, (p) => p.tls.serialSeconds / p.http.serialSeconds),
          1,
        )} (median ${n(
          medianOf(xs, (p) => p.tls.serialSeconds - p.http.serialSeconds),
          2,
        )} s), the ratio from a median ${n(
          medianOf(xs, (p) => p.http.ratio),
          2,
        )} to ${n(
          medianOf(xs, (p) => p.tls.ratio),
          2,
        )}`
      : "";
  const met = (xs: typeof pairs, pick: (p: (typeof pairs)[number]) => JoinSummary) =>
    `${xs.filter((p) => pick(p).ratio <= joinTarget(pick(p))).length} of ${xs.length}`;
  const targets = [
    sequential.length
      ? `maxInFlight 1 (≤ ${TARGETS.joinRatio}): ${met(sequential, (p) => p.tls)} rows on TLS, ${met(sequential, (p) => p.http)} on plain http`
      : "",
    pipelined.length ? `pipelined (≤ ${TARGETS.pipelinedRatio}): ${met(pipelined, (p) => p.tls)} on TLS, ${met(pipelined, (p) => p.http)} on plain http` : "",
  ].filter(Boolean);
  const runsOf = (x: JoinSummary) => j.runs.filter((r) => etcdOf(r) === etcdOf(x) && mifOf(r) === mifOf(x) && r.n === x.n);
  const slow = j.summary.filter((x) => median(runsOf(x).map((r) => r.brokeredBreakdown.slowestCatchUpMs ?? NaN)) > 5_000);
  const serialStalled = slow.some((x) => median(runsOf(x).map((r) => r.serialBreakdown.etcdStartMs)) > 5_000);
  const stall = slow.length
    ? ` In ${slow.map((x) => `etcd ${etcdOf(x)} 1 + ${x.n}${mifOf(x) > 1 ? ` (maxInFlight ${mifOf(x)})` : ""}`).join(", ")} the slowest joiner's catch-up is over 5 s (median). On etcd 3.6 and later a member joining a cluster that has applied more than 100 raft entries is sent a snapshot; when the leader applied the member's own publish before it made that snapshot, the member never applies the publish itself and serves clients only after etcd's request timeout (7 s with these flags; section 5e and docs/etcd-versions.md). ${serialStalled ? "The serial script's etcd starts took as long in the same rows." : 'The serial script\'s etcd starts in the same rows stayed short (see "etcd start").'}`
    : "";
  return `**TLS against plain http.** The same rows as measured on plain http by an earlier run (${other.date.slice(0, 16).replace("T", " ")} UTC${other.loadAverage ? `, load average ${other.loadAverage.start.join(" / ")} at its start` : ""}), beside this run's on TLS.
The two runs are on different hours of a shared machine, so the differences mix what TLS costs with
the machine's load; the ratios, each side measured beside the other in its own run, carry over better.
${[line(sequential, "maxInFlight 1"), line(pipelined, "Pipelined")].filter(Boolean).join("; ")}.
Targets met: ${targets.join("; ")}.${stall}

${table(
  ["etcd", "maxInFlight", "1 + N", "Brokered s (TLS / http)", "Serial s (TLS / http)", "Ratio (TLS / http)"],
  pairs.map(({ tls, http }) => [
    etcdOf(tls),
    mifOf(tls),
    tls.n,
    `${n(tls.brokeredSeconds, 2)} / ${n(http.brokeredSeconds, 2)}`,
    `${n(tls.serialSeconds, 2)} / ${n(http.serialSeconds, 2)}`,
    `${n(tls.ratio, 2)} / ${n(http.ratio, 2)}`,
  ]),
)}

`;
}

export function renderReport(r: Results): string {
  const m = r.machine;
  const header = `Generated ${r.date.slice(0, 16).replace("T", " ")} UTC by \`npm run bench${r.mode === "quick" ? " -- --quick" : ""}\` (${r.mode} mode, ${r.durationSeconds} s) at commit ${m.commit}.
Machine: ${m.cpus} × ${m.cpuModel}, ${gib(Number(m.memoryBytes))}, ${m.os}; Node ${m.node}, wrangler ${m.wrangler}, workerd ${m.workerd},
jose ${m.jose}, etcd ${m.etcd}. Load average (1/5/15 min) ${r.loadAverage.start.join(" / ")} at the start, ${r.loadAverage.end.join(" / ")} at the end: the
machine is shared, which is why every figure stands beside its own ceiling.`;
  const errors = Object.entries(r.errors);
  return [
    INTRO,
    header,
    "",
    "## Summary",
    "",
    summary(r),
    "",
    errors.length ? `Not measured in this run: ${errors.map(([k, e]) => `${k} (${e.split("\n")[0]})`).join("; ")}.\n` : "",
    brokerSection(r),
    handoffSection(r),
    serveSection(r),
    scaleSection(r),
    verifierSection(r),
    joinSection(r),
    catchUpSection(r),
    executableSection(r),
    footprintSection(r),
    kubeadmSection(r),
    k0sSection(r),
    "Raw figures of every run: [bench/results.json](bench/results.json).",
    "",
  ].join("\n");
}

function footprintSection(r: Results): string {
  const failed = r.errors.footprint ? `Footprint: **not measured** — the benchmark failed: \`${r.errors.footprint.split("\n")[0]}\`` : null;
  if (failed || !r.footprint) return `## 7. Footprint (memory)\n\n${failed ?? "Not measured."}\n`;
  const f = r.footprint;
  return `## 7. Footprint (memory)

What each program takes, for sizing the machines that run it: the resident set (VmRSS) of the
process and all its descendants, read from /proc a second after it said it was ready, started
as an operator starts it (\`bin/join-broker\`, the built CLI). \`serve\` counts its Node supervisor
and workerd together, first with one cluster, then with ${f.clusters} clusters each holding an
admitted bootstrap ticket and a queued one; the agent waits in the queue (long polls); the join
API is idle. Median of ${f.runs.length} run(s) (bench/footprint.ts).

${table(
  ["Run", "serve, 1 cluster", `serve, ${f.clusters} clusters`, "agent (queued)", "join API"],
  f.runs.map((x, i) => [i + 1, `${n(x.serveIdleMiB, 1)} MiB`, `${n(x.serveLoadedMiB, 1)} MiB`, `${n(x.agentMiB, 1)} MiB`, `${n(x.joinApiMiB, 1)} MiB`]),
)}

Median: \`serve\` **${n(f.summary.serveIdleMiB, 1)} MiB** with one cluster, **${n(f.summary.serveLoadedMiB, 1)} MiB** with ${f.clusters};
an agent **${n(f.summary.agentMiB, 1)} MiB**; the join API **${n(f.summary.joinApiMiB, 1)} MiB**.
`;
}

function executableSection(r: Results): string {
  const failed = r.errors.executable ? `Single executable file: **not measured** — the benchmark failed: \`${r.errors.executable.split("\n")[0]}\`` : null;
  if (failed || !r.executable) return `## 6. Single executable file\n\n${failed ?? "Not measured."}\n`;
  const e = r.executable;
  const z = e.sizes;
  return `## 6. Single executable file

\`npm run package\` builds the node side (join, controller, admin) as one file per platform: the
official Node ${e.nodeVersion} binary with the bundled CLI injected ([docs/install.md](docs/install.md)).
**Size** on disk, beside what the npm form needs on a node (the package with its production
dependencies, \`npm ls --omit=dev\`, plus a Node binary):

${table(
  ["What", "Size"],
  [
    [`join-broker-${e.version}-linux-x64`, mb(z.x64Bytes)],
    [`join-broker-${e.version}-linux-arm64`, mb(z.arm64Bytes)],
    [`of which the Node ${e.nodeVersion} binary (x64)`, mb(z.nodeX64Bytes)],
    ["npm form: package and production dependencies (workerd and esbuild included)", mb(z.npmTreeBytes)],
    ["npm form: plus the Node binary it runs on", mb(z.npmTreeBytes + z.npmNodeBytes)],
  ],
)}

**Start-up**: ${e.agents} agents (\`join-broker join\`) started at the same moment, each against a
loopback stand-in for the broker of its own; an agent's start-up runs from its spawn to its first
request arriving at the stand-in, on the bench process's clock. Per run, ${e.agents} single-file agents
and ${e.agents} npm-form agents (the same Node version running \`bin/join-broker\`, the fresh built CLI),
one group after the other, the order alternating. Milliseconds, medians over the ${e.agents} agents:

${table(
  ["Run", "Order", "Single file", "npm form", "Ratio"],
  e.runs.map((x) => [x.run + 1, x.order, int(x.executableMedianMs), int(x.npmMedianMs), n(x.executableMedianMs / x.npmMedianMs, 2)]),
)}

Median over the runs: single file **${int(e.summary.executableMs)} ms**, npm form ${int(e.summary.npmMs)} ms (ratio ${n(e.summary.ratio, 2)}).
`;
}

function catchUpSection(r: Results): string {
  const title = "## 5e. etcd alone: a new member on a short raft log and on one past 100 entries";
  const missing = notMeasured(r, "catchup", "etcd alone");
  if (missing || !r.catchup) return `${title}\n\n${missing ?? "Not measured."}\n`;
  const c = r.catchup;
  const run = r.sections.includes("catchup") ? undefined : [...(r.merged ?? [])].reverse().find((m) => m.sections.includes("catchup"));
  const by = run ? separateRunLine(run) : "";
  const long = c.rows.filter((x) => x.writes > 100);
  const stalled = long.reduce((a, x) => a + x.stalled, 0);
  const explained = long.reduce((a, x) => a + x.stalledWithOwnPublishInSnapshot, 0);
  return `${title}

${by}No broker, agent or join API (bench/etcd-catchup.ts): a one-member etcd cluster (plain http on
loopback) takes ${c.settings.writes.join(" or ")} key writes, then \`member add --learner\`, and the new
member's etcd starts with \`--initial-cluster-state existing\`, as every join does; ${c.settings.trials}
trials per row, the two lengths interleaved. Read back from etcd itself: the leader's raft index
right after the add (the new member's own publish is the next entry), whether the member was sent a
snapshot and at which index ("received and saved database snapshot" in its log), whether its first
publish timed out ("failed to publish local member to cluster through raft") and how long it took
from its start to publishing itself ("published local member to cluster through raft"), which is
when it starts serving clients and can be promoted.

${table(
  [
    "etcd",
    "Key writes before the add",
    "Trials",
    "Sent a snapshot",
    "Snapshot held its own publish",
    "First publish timed out",
    "… and its snapshot held it",
    "Start → published, median ms",
    "max ms",
  ],
  c.rows.map((x) => [
    x.etcd,
    x.writes,
    x.trials,
    x.snapshots,
    x.ownPublishInSnapshot,
    x.stalled,
    x.stalledWithOwnPublishInSnapshot,
    int(x.publishMsMedian),
    int(x.publishMsMax),
  ]),
)}

What it shows: on etcd 3.6 and later a leader that has applied more than 100 entries has taken an
in-memory snapshot and compacted its raft log behind it, so a member that starts empty is sent a
snapshot, made at the leader's applied index when it is sent. The new member proposes its publish
the moment it hears from the leader, and the leader's snapshot goes out one round trip later
(after the member has refused the leader's first append): when the publish was applied first, it
is inside the snapshot, the member never applies that entry itself, its request waits out etcd's
request timeout (5 s + 2 election timeouts: 7 s) and the second publish goes through. Past 100
writes ${stalled} member(s) stalled, ${explained} of them with their own publish inside the snapshot
they were sent. 3.4 and 3.5 compact only every 100 000 entries, so a young cluster's new member
replays the log. This is etcd's own behaviour, the same for any tool that adds a member to a
cluster whose log is past 100 entries (every cluster Kubernetes has used): see
[docs/etcd-versions.md](docs/etcd-versions.md#a-new-member-and-the-raft-log).
`;
}
