/**
 * Admin and node calls the benchmarks share, through the typed broker client over the bench's
 * keep-alive HTTP client: a fresh cluster with an enrollment token and a policy, ticket
 * requests, and paging through the admin lists.
 * @module
 */
import type { AdminClient, AdminTicket, AuditEntry, ClusterClient, PolicyInput, Reply, TicketView } from "../../src/shared/client/index.ts";
import { brokerClient, type BrokerProcess } from "../../test/support/stack.ts";
import type { HttpClient } from "./http.ts";

export interface BenchCluster {
  name: string;
  enrollmentToken: string;
  /** The cluster's admin API, as the admin. */
  admin: AdminClient;
  /** The cluster's node API with the enrollment token, as a node asks for and reads its ticket. */
  nodes: ClusterClient;
  /** The cluster's node API with a ticket's admission, as the admitted node reports. */
  admitted(admission: string): ClusterClient;
}

/** A queue that holds everything a benchmark throws at it and never expires a lease mid-run. */
export const ROOMY_POLICY: PolicyInput = { maxInFlight: 1, leaseSeconds: 3600, admissionTtlSeconds: 7200, maxQueue: 100_000 };

export async function createCluster(http: HttpClient, broker: BrokerProcess, name: string, policy: PolicyInput = ROOMY_POLICY): Promise<BenchCluster> {
  const as = (bearer?: string) => brokerClient(broker, { bearer, fetch: http.fetch });
  const admin = as().admin(name);
  const created = await admin.createEnrollmentToken({ description: "bench" });
  await admin.setPolicy(policy);
  const enrollmentToken = created.body.token;
  return { name, enrollmentToken, admin, nodes: as(enrollmentToken).cluster(name), admitted: (admission) => as(admission).cluster(name) };
}

export function peerUrlOf(node: string): string {
  return `https://${node}.bench.invalid:2380`;
}

export function requestTicket(cluster: BenchCluster, node: string): Promise<Reply<TicketView>> {
  return cluster.nodes.requestTicket(node, peerUrlOf(node));
}

export function completeTicket(cluster: BenchCluster, ticket: string, admission: string, memberID: string): Promise<Reply<TicketView>> {
  return cluster.admitted(admission).complete(ticket, memberID);
}

/** Every ticket of the cluster in queue order (seq), 1,000 a page. */
export async function allTickets(cluster: BenchCluster): Promise<AdminTicket[]> {
  const out: AdminTicket[] = [];
  let after = 0;
  for (let page = 0; page < 10_000; page++) {
    const { tickets, next } = (await cluster.admin.tickets({ limit: 1000, after })).body;
    out.push(...tickets);
    if (next === null || tickets.length === 0) break;
    after = next;
  }
  return out;
}

/** The whole audit log, oldest first, 1,000 entries a page. */
export async function allAudit(cluster: BenchCluster): Promise<AuditEntry[]> {
  const out: AuditEntry[] = [];
  let after = 0;
  for (let page = 0; page < 100_000; page++) {
    const { entries, next } = (await cluster.admin.audit({ limit: 1000, after })).body;
    if (entries.length === 0) break;
    out.push(...entries);
    after = next;
  }
  return out;
}
