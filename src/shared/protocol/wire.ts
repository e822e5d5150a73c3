/**
 * The contract's wire types: the JSON bodies the broker answers with (docs/protocol.md "ticket view"
 * and the admin views). Defined here once; the broker's storage layer maps its rows to them
 * (src/broker/queue/views.ts) and every client reads them.
 * @module
 */

/** The contract these types implement (docs/protocol.md's title): what `--version` and the OpenAPI document name. */
export const CONTRACT_VERSION = "1.2";

export type TicketState = "queued" | "admitted" | "joined" | "expired" | "abandoned" | "revoked";
export type Role = "bootstrap" | "join";

export interface QueuePolicy {
  /** Admitted tickets at once; etcd <= 3.5 allows a single learner, so 1 by default. */
  maxInFlight: number;
  /** Seconds an admitted node has to heartbeat or complete before its admission ends. */
  leaseSeconds: number;
  /** Lifetime of an admission token; a lease never outlives its token. */
  admissionTtlSeconds: number;
  /** Queued tickets at most; beyond it new nodes are told to come back later. */
  maxQueue: number;
}

/** The bounds `PUT /policy` accepts for each field. */
export const POLICY_LIMITS: Record<keyof QueuePolicy, { min: number; max: number }> = {
  maxInFlight: { min: 1, max: 16 },
  leaseSeconds: { min: 1, max: 3600 },
  admissionTtlSeconds: { min: 10, max: 86400 },
  maxQueue: { min: 1, max: 100000 },
};

/** What names a ticket, in the node's view and the admin's alike. */
export interface TicketIdentity {
  ticket: string;
  cluster: string;
  node: string;
  peerURL: string;
  state: TicketState;
  role: Role;
}

/** What every ticket view carries, whatever its state. */
interface TicketViewBase extends TicketIdentity {
  memberID?: string;
  /** The ticket is under the start rule (addition; gate mode asks for it). */
  exclusiveUntilStarted?: boolean;
  reason?: string;
  createdAt: string;
}

/** A ticket waiting its turn: where it stands, and when to ask again. */
export interface QueuedTicket extends TicketViewBase {
  state: "queued";
  position?: number;
  retryAfter?: number;
  estimatedWaitSeconds?: number;
  /** What the queue waits for besides this ticket's turn (contract v1.1 addition). */
  waitingFor?: "paused" | "bootstrap";
  /** Queued behind a bootstrap: the node that holds the bootstrap ticket. */
  bootstrapNode?: string;
}

/** A ticket holding a slot: always with the admission token that proves it, its lease and the cluster's slots. */
export interface AdmittedTicket extends TicketViewBase {
  state: "admitted";
  /** The admission token (JWT): the bearer for heartbeat, complete and the join API. */
  admission: string;
  jti: string;
  leaseExpiresAt: string;
  admissionExpiresAt: string;
  /** The cluster's policy, so the agent starts etcd with as many learner slots (--max-learners). */
  maxInFlight: number;
  /** When the node reported its etcd member started (addition). */
  memberStartedAt?: string;
}

/** A ticket whose way ended: joined, or given up (expired, abandoned, revoked; `reason` says why). */
export interface EndedTicket extends TicketViewBase {
  state: Exclude<TicketState, "queued" | "admitted">;
}

/** The ticket view (docs/protocol.md): its fields depend on its state. */
export type TicketView = QueuedTicket | AdmittedTicket | EndedTicket;

/** A ticket as the admin API lists it. */
export interface AdminTicket extends TicketIdentity {
  seq: number;
  jti?: string;
  createdAt?: string;
  admittedAt?: string;
  leaseExpiresAt?: string;
  endedAt?: string;
  reason?: string;
  memberID?: string;
  exclusiveUntilStarted?: boolean;
  memberStartedAt?: string;
}

export interface EnrollmentToken {
  id: string;
  description?: string;
  state: "active" | "revoked" | "expired" | "exhausted";
  createdAt?: string;
  expiresAt: string | null;
  maxUses: number | null;
  uses: number;
  revokedAt?: string;
  nodes?: string[];
  peerHosts?: string[];
}

export interface Member {
  node: string;
  peerURL: string;
  memberID?: string;
  source: "bootstrap" | "join" | "adopt";
  joinedAt?: string;
}

export interface AuditEntry {
  seq: number;
  time?: string;
  actor: string;
  action: string;
  subject: string;
  detail: Record<string, unknown>;
}

/** A read-only admin credential as the broker lists it (never its secret). */
export interface AdminCredential {
  id: string;
  readOnly: true;
  cluster: string | null;
  description?: string;
  createdAt: string;
  revokedAt?: string;
  state: "active" | "revoked";
}

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

/** A member a node left in etcd and could not remove, which an operator must remove before the cluster resumes. */
export interface NeedsOperator {
  node: string;
  ticket: string;
  /** The etcd member ID, decimal. */
  memberID: string;
  /** What the node said: etcd's answer, and the command that removes the member. */
  detail: string;
  at: string;
}

export interface ClusterStatus {
  cluster: string;
  issuer: string;
  createdAt: string;
  bootstrapped: boolean;
  adopted: boolean;
  /** The node that holds (or held) the one bootstrap ticket. */
  bootstrapNode: string | null;
  /**
   * When the broker's state was last marked restored from an earlier point, and whether
   * bootstrap waits for an admin's decision because of it (`adopt`, or `bootstrap/allow`).
   */
  restored: { at: string | null; awaitingAdmin: boolean };
  paused: boolean;
  /**
   * Set while the cluster is paused because a node gave up its admission leaving a member in etcd
   * that it could not remove (`POST …/tickets/{ticket}/stuck`): remove that member, then resume.
   */
  needsOperator: NeedsOperator | null;
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
