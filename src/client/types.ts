/**
 * The shapes of the broker's answers, taken from the broker's own view builders so that the
 * client and the server cannot drift apart silently (a change there fails the type check here).
 * @module
 */
import type { QueuePolicy } from "../queue/policy.ts";
import type { adminTicketView, auditView, enrollmentTokenView, memberView } from "../queue/views.ts";

export type { QueuePolicy } from "../queue/policy.ts";
export type { TicketView } from "../queue/views.ts";

export type AdminTicket = ReturnType<typeof adminTicketView>;
export type EnrollmentToken = ReturnType<typeof enrollmentTokenView>;
export type Member = ReturnType<typeof memberView>;
export type AuditEntry = ReturnType<typeof auditView>;

export interface CreatedEnrollmentToken {
  id: string;
  /** The secret: the broker stores only its hash and never shows it again. */
  token: string;
  expiresAt: string | null;
  maxUses: number | null;
  description?: string;
  /** Node name patterns the token is limited to (absent: any node). */
  nodes?: string[];
  /** Peer hosts (names, addresses, CIDRs) the token is limited to (absent: any host). */
  peerHosts?: string[];
}

export interface ClusterStatus {
  cluster: string;
  issuer: string;
  createdAt: string;
  bootstrapped: boolean;
  adopted: boolean;
  /** The node that holds (or held) the one bootstrap ticket. */
  bootstrapNode: string | null;
  paused: boolean;
  policy: QueuePolicy;
  queue: { queued: number; admitted: number };
  inFlight: AdminTicket[];
  members: Member[];
  signingKey: string | null;
  typicalAdmissionSeconds: number;
  schemaVersion: number;
  /** Size of the cluster's Durable Object database. */
  databaseSizeBytes: number;
  /** How long history is kept (seconds), and when the alarm last deleted what was past it. */
  retention: {
    endedTicketSeconds: number;
    endedAdmissionSeconds: number;
    endedEnrollmentTokenSeconds: number;
    auditSeconds: number;
    sweepIntervalSeconds: number;
    lastSweptAt: string | null;
  };
}

export interface TicketList {
  tickets: AdminTicket[];
  /** Pass as `after` for the next page; null on the last page. */
  next: number | null;
}

export interface RevokedAdmission {
  jti: string;
  ticket: string;
  node: string;
  status: string;
  /** False when the admission had already ended (revoked, expired, completed, abandoned). */
  changed: boolean;
}

export interface RotatedKeys {
  kid: string;
  retired: string | null;
  /** Key ids in the JWKS now. */
  keys: string[];
}

export interface Adopted {
  adopted: number;
  members: Member[];
}

export interface AuditPage {
  entries: AuditEntry[];
  /** The seq to pass as `after` next time. */
  next: number;
}

export interface Jwks {
  keys: Record<string, unknown>[];
}

export interface RevocationList {
  revoked: { jti: string; exp: number; reason?: string }[];
}

export type Introspection = { active: true; claims: Record<string, unknown> } | { active: false; reason: string };
