/**
 * Admin and node calls the benchmarks share: a fresh cluster with an enrollment token and a
 * policy, ticket requests, and paging through the admin lists.
 * @module
 */
import type { HttpClient, Reply } from "./http.ts";

export interface BenchCluster {
  name: string;
  enrollmentToken: string;
}

export interface PolicyInput {
  maxInFlight?: number;
  leaseSeconds?: number;
  admissionTtlSeconds?: number;
  maxQueue?: number;
}

/** A queue that holds everything a benchmark throws at it and never expires a lease mid-run. */
export const ROOMY_POLICY: PolicyInput = { maxInFlight: 1, leaseSeconds: 3600, admissionTtlSeconds: 7200, maxQueue: 100_000 };

export async function createCluster(http: HttpClient, adminToken: string, name: string, policy: PolicyInput = ROOMY_POLICY): Promise<BenchCluster> {
  const created = await http.expect([201], "POST", `/v1/admin/clusters/${name}/enrollment-tokens`, { bearer: adminToken, body: { description: "bench" } });
  await http.expect([200], "PUT", `/v1/admin/clusters/${name}/policy`, { bearer: adminToken, body: policy });
  return { name, enrollmentToken: (created.body as { token: string }).token };
}

export function peerUrlOf(node: string): string {
  return `https://${node}.bench.invalid:2380`;
}

export function requestTicket(http: HttpClient, cluster: BenchCluster, node: string): Promise<Reply> {
  return http.expect([200, 201, 202], "POST", `/v1/clusters/${cluster.name}/tickets`, {
    bearer: cluster.enrollmentToken,
    body: { node, peerURL: peerUrlOf(node) },
  });
}

export function completeTicket(http: HttpClient, cluster: BenchCluster, ticket: string, admission: string, memberID: string): Promise<Reply> {
  return http.expect([200], "POST", `/v1/clusters/${cluster.name}/tickets/${ticket}/complete`, { bearer: admission, body: { memberID } });
}

export interface AdminTicket {
  ticket: string;
  node: string;
  state: string;
  role: string;
  seq: number;
  jti?: string;
}

export interface AuditEntry {
  seq: number;
  action: string;
  subject: string;
  detail: Record<string, unknown>;
}

/** Every ticket of the cluster in queue order (seq), 1,000 a page. */
export async function allTickets(http: HttpClient, adminToken: string, cluster: string): Promise<AdminTicket[]> {
  const out: AdminTicket[] = [];
  let after = 0;
  for (let page = 0; page < 10_000; page++) {
    const { body } = await http.expect([200], "GET", `/v1/admin/clusters/${cluster}/tickets?limit=1000&after=${after}`, { bearer: adminToken });
    const { tickets, next } = body as { tickets: AdminTicket[]; next: number | null };
    out.push(...tickets);
    if (next === null || tickets.length === 0) break;
    after = next;
  }
  return out;
}

/** The whole audit log, oldest first, 1,000 entries a page. */
export async function allAudit(http: HttpClient, adminToken: string, cluster: string): Promise<AuditEntry[]> {
  const out: AuditEntry[] = [];
  let after = 0;
  for (let page = 0; page < 100_000; page++) {
    const { body } = await http.expect([200], "GET", `/v1/admin/clusters/${cluster}/audit?limit=1000&after=${after}`, { bearer: adminToken });
    const { entries, next } = body as { entries: AuditEntry[]; next: number };
    if (entries.length === 0) break;
    out.push(...entries);
    after = next;
  }
  return out;
}
