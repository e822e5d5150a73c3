/**
 * The join queue's rules, as pure functions of the facts the Durable Object reads from SQL.
 * Nothing here reads a clock or storage: callers pass `now` and the rows they loaded, so the
 * same rules run in the Durable Object and in the property tests.
 * @module
 */

import type { QueuePolicy, Role, TicketState } from "../../shared/protocol/wire.ts";

export type { QueuePolicy, Role, TicketState } from "../../shared/protocol/wire.ts";
import { POLICY_LIMITS } from "../../shared/protocol/wire.ts";
export { POLICY_LIMITS };

export const DEFAULT_POLICY: QueuePolicy = {
  maxInFlight: 1,
  leaseSeconds: 60,
  admissionTtlSeconds: 900,
  maxQueue: 1000,
};

export interface ClusterFacts {
  /** The bootstrap ticket completed: etcd exists, everyone else joins. */
  bootstrapped: boolean;
  /** An admin declared the cluster pre-existing: no bootstrap ticket, ever. */
  adopted: boolean;
  /** The node that holds the one bootstrap ticket, once it was issued. */
  bootstrapNode: string | null;
  paused: boolean;
  /**
   * The broker's state was restored from an earlier point (a backup, a point-in-time restore):
   * a cluster that looks never bootstrapped may exist, so no bootstrap until an admin decides.
   */
  restored: boolean;
}

export type TicketRequestDecision =
  | { kind: "existing" }
  | { kind: "already_joined" }
  | { kind: "peer_url_conflict"; heldBy: "ticket" | "member" }
  | { kind: "revive_bootstrap" }
  | { kind: "restored_awaiting_admin" }
  | { kind: "queue_full" }
  | { kind: "new"; role: Role };

export interface TicketRequestFacts {
  cluster: ClusterFacts;
  node: string;
  peerURL: string;
  /** The node's live (queued or admitted) ticket, if any. */
  live: { peerURL: string } | null;
  /** The node as a recorded etcd member, if it joined (or was adopted). */
  member: { peerURL: string } | null;
  queuedCount: number;
  policy: QueuePolicy;
}

/**
 * What a node's ticket request does. The broker, never a node's local files, decides between
 * bootstrap and join: the first node of a fresh cluster bootstraps, every other node joins, and
 * the bootstrap ticket goes back only to the node that holds it.
 */
export function decideTicketRequest(f: TicketRequestFacts): TicketRequestDecision {
  if (f.live) return f.live.peerURL === f.peerURL ? { kind: "existing" } : { kind: "peer_url_conflict", heldBy: "ticket" };
  if (f.member) return f.member.peerURL === f.peerURL ? { kind: "already_joined" } : { kind: "peer_url_conflict", heldBy: "member" };
  if (needsBootstrap(f.cluster)) {
    const bootstraps = f.cluster.bootstrapNode === null || f.cluster.bootstrapNode === f.node;
    if (bootstraps && f.cluster.restored) return { kind: "restored_awaiting_admin" };
    if (f.cluster.bootstrapNode === null) return { kind: "new", role: "bootstrap" };
    if (f.cluster.bootstrapNode === f.node) return { kind: "revive_bootstrap" };
  }
  if (f.queuedCount >= f.policy.maxQueue) return { kind: "queue_full" };
  return { kind: "new", role: "join" };
}

export function needsBootstrap(c: ClusterFacts): boolean {
  return !c.bootstrapped && !c.adopted;
}

/**
 * The only role that may be admitted now: until the cluster exists only its bootstrap ticket,
 * afterwards only joiners. Null while paused, and while a restored cluster that looks never
 * bootstrapped waits for an admin's decision.
 */
export function admittableRole(c: ClusterFacts): Role | null {
  if (c.paused) return null;
  if (!needsBootstrap(c)) return "join";
  return c.restored ? null : "bootstrap";
}

/** Whether bootstrap waits for an admin: the state was restored and the cluster looks never bootstrapped. */
export function awaitsAdmin(c: ClusterFacts): boolean {
  return c.restored && needsBootstrap(c);
}

/** How many more tickets may be admitted right now. */
export function freeSlots(inFlight: number, policy: QueuePolicy, c: ClusterFacts): number {
  if (c.paused) return 0;
  return Math.max(0, policy.maxInFlight - inFlight);
}

/** What the start rule needs to know about an admitted ticket, or about the next one in line. */
export interface StartFacts {
  /** Its installer adds its own member and writes `--initial-cluster` from etcd's member list (gate mode). */
  exclusiveUntilStarted: boolean;
  /** Its node reported its etcd member started (its etcd runs as a member of the cluster). */
  started: boolean;
}

/**
 * Whether `next` may be admitted beside the tickets `admitted` now (slots aside). An installer
 * that adds its own member writes every member it lists into `--initial-cluster`; a member added
 * after that and before its etcd started makes the first one's etcd refuse to start ("member
 * count is unequal", kubeadm#2005). So while an exclusive ticket's member has not started
 * nobody joins beside it, and an exclusive ticket waits until every admitted member started.
 */
export function startRuleAdmits(admitted: readonly StartFacts[], next: Pick<StartFacts, "exclusiveUntilStarted">): boolean {
  if (admitted.some((t) => t.exclusiveUntilStarted && !t.started)) return false;
  return !next.exclusiveUntilStarted || admitted.every((t) => t.started);
}

/** How many of `queued` (in line order) may be admitted now, one after another, under the start rule. */
export function admissibleUnderStartRule(admitted: readonly StartFacts[], queued: readonly Pick<StartFacts, "exclusiveUntilStarted">[]): number {
  const now = [...admitted];
  let n = 0;
  for (const next of queued) {
    if (!startRuleAdmits(now, next)) break;
    now.push({ exclusiveUntilStarted: next.exclusiveUntilStarted, started: false });
    n++;
  }
  return n;
}

/** A lease ends `leaseSeconds` from now, and never after its admission token expires. */
export function leaseEnd(nowMs: number, policy: QueuePolicy, tokenExpSeconds: number): number {
  return Math.min(nowMs + policy.leaseSeconds * 1000, tokenExpSeconds * 1000);
}

export type TicketEvent = "admit" | "complete" | "expire" | "abandon" | "revoke" | "reassign" | "revive";

const TRANSITIONS: Record<TicketEvent, { from: readonly TicketState[]; to: TicketState }> = {
  admit: { from: ["queued"], to: "admitted" },
  complete: { from: ["admitted"], to: "joined" },
  expire: { from: ["admitted"], to: "expired" },
  abandon: { from: ["queued", "admitted"], to: "abandoned" },
  revoke: { from: ["admitted"], to: "revoked" },
  /** An admin hands the bootstrap role to another node: the old bootstrap ticket ends, queued or admitted. */
  reassign: { from: ["queued", "admitted"], to: "revoked" },
  revive: { from: ["expired", "abandoned", "revoked"], to: "queued" },
};

/** The state after `event`, or null when the event does not apply to a ticket in `state`. */
export function transition(state: TicketState, event: TicketEvent): TicketState | null {
  const t = TRANSITIONS[event];
  return t.from.includes(state) ? t.to : null;
}

/**
 * Seconds a queued node should wait before asking again: its position times the typical time
 * one admission takes, between 1 and 30.
 */
export function retryAfterSeconds(position: number, typicalAdmissionSeconds: number, policy: QueuePolicy): number {
  const perAdmission = typicalAdmissionSeconds > 0 ? typicalAdmissionSeconds : 5;
  const estimate = (Math.ceil(position / policy.maxInFlight) * perAdmission) / 2;
  return Math.min(30, Math.max(1, Math.round(estimate)));
}

/** Estimated seconds until a queued ticket at `position` is admitted. */
export function estimatedWaitSeconds(position: number, typicalAdmissionSeconds: number, policy: QueuePolicy): number {
  const perAdmission = typicalAdmissionSeconds > 0 ? typicalAdmissionSeconds : 5;
  return Math.round(Math.ceil(position / policy.maxInFlight) * perAdmission);
}

/**
 * How long history is kept before the alarm deletes it. Memberships are never deleted, and an
 * ended admission stays (on the revocation list) at least until its token's `exp`.
 */
export interface RetentionPolicy {
  /** Tickets that ended (joined, expired, abandoned, revoked), counted from their end. */
  endedTicketSeconds: number;
  /** Admissions that ended, counted from their end (and never before their token's `exp`). */
  endedAdmissionSeconds: number;
  /** Enrollment tokens past their expiry or revoked, counted from then. */
  endedEnrollmentTokenSeconds: number;
  /** Audit rows, counted from when they were written. */
  auditSeconds: number;
  /** How often the alarm looks for history to delete. */
  sweepIntervalSeconds: number;
}

const DAY = 86_400;

export const DEFAULT_RETENTION: RetentionPolicy = {
  endedTicketSeconds: 7 * DAY,
  endedAdmissionSeconds: 7 * DAY,
  endedEnrollmentTokenSeconds: 7 * DAY,
  auditSeconds: 30 * DAY,
  sweepIntervalSeconds: 3600,
};

/** The instants before which each kind of history is deleted at `nowMs`. */
export function retentionCutoffs(nowMs: number, r: RetentionPolicy) {
  return {
    nowMs,
    ticketsEndedBefore: nowMs - r.endedTicketSeconds * 1000,
    admissionsEndedBefore: nowMs - r.endedAdmissionSeconds * 1000,
    enrollmentTokensEndedBefore: nowMs - r.endedEnrollmentTokenSeconds * 1000,
    auditBefore: nowMs - r.auditSeconds * 1000,
  };
}

export function validatePolicy(p: QueuePolicy): string | null {
  for (const [key, { min, max }] of Object.entries(POLICY_LIMITS) as [keyof QueuePolicy, { min: number; max: number }][]) {
    const v = p[key];
    if (!Number.isInteger(v) || v < min || v > max) return `${key} must be an integer from ${min} to ${max}`;
  }
  if (p.leaseSeconds > p.admissionTtlSeconds) return "leaseSeconds must not exceed admissionTtlSeconds";
  return null;
}
