/**
 * A cluster's queue as Prometheus text exposition (version 0.0.4).
 * @module
 */
import type { MetricsSnapshot } from "./store.ts";

export const WAIT_BUCKETS_SECONDS = [0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800] as const;

export interface MetricsInput {
  cluster: string;
  paused: boolean;
  /** A node gave up leaving a member in etcd it could not remove: paused until an operator resumes. */
  needsOperator: boolean;
  bootstrapped: boolean;
  maxInFlight: number;
  /** The object's SQLite database (`ctx.storage.sql.databaseSize`). */
  databaseSizeBytes: number;
  snapshot: MetricsSnapshot;
}

export function renderMetrics(m: MetricsInput): string {
  const label = `cluster="${m.cluster}"`;
  const s = m.snapshot;
  const lines: string[] = [];
  const metric = (name: string, type: "gauge" | "counter" | "histogram", help: string, samples: [string, number][]) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of samples) lines.push(`${name}{${labels}} ${value}`);
  };
  const admissions = (status: keyof MetricsSnapshot["admissionsByStatus"]) => s.admissionsByStatus[status] ?? 0;

  metric("join_broker_queue_length", "gauge", "Tickets waiting for admission.", [[label, s.ticketsByState.queued ?? 0]]);
  metric("join_broker_in_flight", "gauge", "Admitted tickets not yet joined.", [[label, s.ticketsByState.admitted ?? 0]]);
  metric("join_broker_max_in_flight", "gauge", "Policy: admitted tickets at once.", [[label, m.maxInFlight]]);
  metric("join_broker_paused", "gauge", "1 while admissions are paused.", [[label, m.paused ? 1 : 0]]);
  metric(
    "join_broker_needs_operator",
    "gauge",
    "1 while the cluster is paused because a node left a member in etcd it could not remove (remove it, then resume).",
    [[label, m.needsOperator ? 1 : 0]],
  );
  metric("join_broker_bootstrapped", "gauge", "1 once the cluster exists.", [[label, m.bootstrapped ? 1 : 0]]);
  metric("join_broker_members", "gauge", "Nodes recorded as etcd members.", [[label, s.members]]);
  metric("join_broker_admissions_total", "counter", "Admission tokens issued.", [
    [`${label},role="bootstrap"`, s.admissionsByRole.bootstrap ?? 0],
    [`${label},role="join"`, s.admissionsByRole.join ?? 0],
  ]);
  metric("join_broker_joins_total", "counter", "Admissions completed by a joined member.", [[label, admissions("completed")]]);
  metric("join_broker_expiries_total", "counter", "Admissions whose lease expired.", [[label, admissions("expired")]]);
  metric("join_broker_revocations_total", "counter", "Admissions revoked by an admin.", [[label, admissions("revoked")]]);
  metric("join_broker_abandons_total", "counter", "Admissions abandoned by their node.", [[label, admissions("abandoned")]]);
  metric("join_broker_database_bytes", "gauge", "Size of the cluster's Durable Object database.", [[label, m.databaseSizeBytes]]);
  metric(
    "join_broker_tickets",
    "gauge",
    "Tickets queued or admitted now; for ended states, tickets that ended so since the cluster was created (history is deleted, counts are kept).",
    Object.entries(s.ticketsByState).map(([state, n]) => [`${label},state="${state}"`, n ?? 0]),
  );

  lines.push(
    "# HELP join_broker_admission_wait_seconds Time from a ticket's creation to its admission.",
    "# TYPE join_broker_admission_wait_seconds histogram",
  );
  WAIT_BUCKETS_SECONDS.forEach((le, i) => {
    lines.push(`join_broker_admission_wait_seconds_bucket{${label},le="${le}"} ${s.wait.cumulative[i]}`);
  });
  lines.push(`join_broker_admission_wait_seconds_bucket{${label},le="+Inf"} ${s.wait.count}`);
  lines.push(`join_broker_admission_wait_seconds_sum{${label}} ${s.wait.sumSeconds}`);
  lines.push(`join_broker_admission_wait_seconds_count{${label}} ${s.wait.count}`);
  return lines.join("\n") + "\n";
}
