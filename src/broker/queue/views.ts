/**
 * The contract's wire types (src/shared/protocol/wire.ts) built from SQL rows: the only place
 * that knows both.
 * @module
 */
import type { AdminTicket, AuditEntry, EnrollmentToken, Member, NeedsOperator, QueuePolicy, TicketIdentity, TicketView } from "../../shared/protocol/wire.ts";
import type { AuditRow, EnrollmentTokenRow, MemberRow, TicketRow } from "./store.ts";

/** A failed RPC: the Worker turns it into problem+json. Expected outcomes are returned, not thrown. */
export { fail, type Failure, type Outcome } from "../../shared/protocol/outcome.ts";

export function iso(ms: number | null | undefined): string | undefined {
  return ms === null || ms === undefined ? undefined : new Date(ms).toISOString();
}

export function ticketEtag(t: TicketRow): string {
  return `"${t.id}.${t.version}"`;
}

export interface QueuedExtras {
  position: number;
  retryAfter: number;
  estimatedWaitSeconds: number;
  waitingFor?: "paused" | "bootstrap";
  bootstrapNode?: string;
}

function ticketIdentity(cluster: string, t: TicketRow): TicketIdentity {
  return { ticket: t.id, cluster, node: t.node, peerURL: t.peer_url, state: t.state, role: t.role };
}

export function ticketView(
  cluster: string,
  t: TicketRow,
  extras: { queued?: QueuedExtras; admission?: { token: string; expiresAt: number }; maxInFlight: number },
): TicketView {
  const base = { ...ticketIdentity(cluster, t), createdAt: iso(t.created_at)! };
  let view: TicketView;
  if (t.state === "queued") view = { ...base, state: t.state, ...extras.queued };
  else if (t.state === "admitted") {
    // Admitting writes the ticket's jti and its active admission in one command, and an active
    // admission is never swept: an admitted row without them is a broken store.
    const a = extras.admission;
    if (!a || !t.jti) throw new Error(`ticket ${t.id} is admitted without its admission`);
    view = {
      ...base,
      state: t.state,
      admission: a.token,
      jti: t.jti,
      leaseExpiresAt: iso(t.lease_expires_at)!,
      admissionExpiresAt: iso(a.expiresAt * 1000)!,
      maxInFlight: extras.maxInFlight,
    };
  } else view = { ...base, state: t.state };
  if (t.member_id) view.memberID = t.member_id;
  if (t.exclusive_until_started === 1) view.exclusiveUntilStarted = true;
  if (view.state === "admitted" && t.member_started_at !== null) view.memberStartedAt = iso(t.member_started_at);
  if (t.end_reason) view.reason = t.end_reason;
  return view;
}

export function adminTicketView(cluster: string, t: TicketRow): AdminTicket {
  return {
    ...ticketIdentity(cluster, t),
    seq: t.seq,
    jti: t.jti ?? undefined,
    createdAt: iso(t.created_at),
    admittedAt: iso(t.admitted_at),
    leaseExpiresAt: t.state === "admitted" ? iso(t.lease_expires_at) : undefined,
    endedAt: iso(t.ended_at),
    reason: t.end_reason ?? undefined,
    memberID: t.member_id ?? undefined,
    exclusiveUntilStarted: t.exclusive_until_started === 1 ? true : undefined,
    memberStartedAt: iso(t.member_started_at),
  };
}

export function enrollmentTokenView(t: EnrollmentTokenRow, nowMs: number): EnrollmentToken {
  const state: EnrollmentToken["state"] =
    t.revoked_at !== null
      ? "revoked"
      : t.expires_at !== null && t.expires_at <= nowMs
        ? "expired"
        : t.max_uses !== null && t.uses >= t.max_uses
          ? "exhausted"
          : "active";
  return {
    id: t.id,
    description: t.description ?? undefined,
    state,
    createdAt: iso(t.created_at),
    expiresAt: iso(t.expires_at) ?? null,
    maxUses: t.max_uses,
    uses: t.uses,
    revokedAt: iso(t.revoked_at),
    nodes: t.nodes === null ? undefined : (JSON.parse(t.nodes) as string[]),
    peerHosts: t.peer_hosts === null ? undefined : (JSON.parse(t.peer_hosts) as string[]),
  };
}

/** The cluster's `needs_operator` column as the admin's status shows it, or null. */
export function needsOperatorView(text: string | null): NeedsOperator | null {
  if (text === null) return null;
  const n = JSON.parse(text) as { node: string; ticket: string; memberID: string; detail: string; at: number };
  return { node: n.node, ticket: n.ticket, memberID: n.memberID, detail: n.detail, at: iso(n.at)! };
}

export function memberView(m: MemberRow): Member {
  return { node: m.node, peerURL: m.peer_url, memberID: m.member_id ?? undefined, source: m.source, joinedAt: iso(m.joined_at) };
}

export function auditView(a: AuditRow): AuditEntry {
  return { seq: a.seq, time: iso(a.at), actor: a.actor, action: a.action, subject: a.subject, detail: JSON.parse(a.detail) as Record<string, unknown> };
}

export function policyView(p: QueuePolicy): QueuePolicy {
  return { ...p };
}

export type { TicketView };
