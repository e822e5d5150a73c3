/**
 * Typed reads and writes of the JoinQueue's SQLite tables. Every method is synchronous so that
 * callers can group a state change and its audit row in one `transactionSync`.
 *
 * Nothing derived from the tickets is kept up to date by hand here. How many tickets are queued
 * and admitted is kept by SQL triggers (migration 6) in the statement that changes a ticket, so
 * that no write can leave it behind; the highest seq and the earliest lease end are indexed
 * queries. What is kept in memory is a copy of rows that only this store's own methods change,
 * dropped when they write them: the cluster row and the enrollment tokens already presented
 * (without their use count, which tickets change). After a rolled-back transaction the caller
 * drops these (`forgetCached`) and they are read again.
 * @module
 */
import type { ClusterFacts, QueuePolicy, Role, StartFacts, TicketState } from "./policy.ts";

export interface ClusterRow {
  name: string;
  issuer: string;
  created_at: number;
  bootstrapped: number;
  adopted: number;
  bootstrap_node: string | null;
  paused: number;
  max_in_flight: number;
  lease_seconds: number;
  admission_ttl_seconds: number;
  max_queue: number;
  typical_admission_ms: number;
  /** When the alarm last deleted history past its retention window (migration 3). */
  swept_at: number;
  /** When the state was marked restored from an earlier point; null once an admin decided (migration 5). */
  restored_at: number | null;
  /** The last restore of a self-hosted data directory this cluster took note of (migration 5). */
  restore_id: string | null;
  /** JSON {node, ticket, memberID, detail, at} while a member a node could not remove waits for an operator (migration 8). */
  needs_operator: string | null;
}

export interface TicketRow {
  id: string;
  seq: number;
  node: string;
  peer_url: string;
  role: Role;
  state: TicketState;
  version: number;
  enrollment_token_id: string | null;
  created_at: number;
  admitted_at: number | null;
  lease_expires_at: number | null;
  jti: string | null;
  ended_at: number | null;
  end_reason: string | null;
  member_id: string | null;
  /** 1: nobody is admitted beside this ticket until its member started, nor it beside an unstarted one (gate mode). */
  exclusive_until_started: number;
  /** When the node reported its etcd member started, while admitted. */
  member_started_at: number | null;
}

export type AdmissionStatus = "active" | "completed" | "expired" | "abandoned" | "revoked";

export interface AdmissionRow {
  jti: string;
  ticket_id: string;
  node: string;
  kid: string;
  token: string;
  issued_at: number;
  expires_at: number;
  status: AdmissionStatus;
  ended_at: number | null;
  reason: string | null;
}

export interface EnrollmentTokenRow {
  id: string;
  token_hash: string;
  description: string | null;
  created_at: number;
  expires_at: number | null;
  max_uses: number | null;
  uses: number;
  revoked_at: number | null;
  /** JSON array of node name globs, or null: any node. */
  nodes: string | null;
  /** JSON array of peer hosts (names, addresses, CIDRs), or null: any host. */
  peer_hosts: string | null;
}

export interface SigningKeyRow {
  kid: string;
  private_jwk: string;
  public_jwk: string;
  created_at: number;
  retired_at: number | null;
  keep_until: number | null;
}

export interface MemberRow {
  node: string;
  peer_url: string;
  member_id: string | null;
  source: "bootstrap" | "join" | "adopt";
  joined_at: number;
}

export interface AuditRow {
  seq: number;
  at: number;
  actor: string;
  action: string;
  subject: string;
  detail: string;
}

type Row = Record<string, SqlStorageValue>;

/** What authenticating with an enrollment token needs: nothing a new ticket changes (its uses). */
export type EnrollmentCredential = Pick<EnrollmentTokenRow, "id" | "expires_at" | "revoked_at" | "nodes" | "peer_hosts">;
const CREDENTIAL_COLUMNS = "id, expires_at, revoked_at, nodes, peer_hosts";

/** The ticket states that hold a place in the queue or a slot. */
type LiveState = "queued" | "admitted";

export interface MetricsSnapshot {
  admissionsByStatus: Partial<Record<AdmissionStatus, number>>;
  admissionsByRole: Partial<Record<Role, number>>;
  ticketsByState: Partial<Record<TicketState, number>>;
  members: number;
  wait: { count: number; sumSeconds: number; cumulative: number[] };
}

export class QueueStore {
  /** False until the schema exists; until then there is no cluster and nothing else is read. */
  schemaReady = false;
  /**
   * The cluster row, read once and kept until this store writes it: the object is the only
   * writer, so the copy cannot go stale (a rolled-back write merely causes one more read).
   */
  #cluster: ClusterRow | null | undefined = undefined;
  /** Known enrollment tokens by hash and by id (unknown hashes are never kept, so these stay small). */
  readonly #credentials = new Map<string, EnrollmentCredential>();
  readonly #credentialsById = new Map<string, EnrollmentCredential>();

  constructor(private readonly sql: SqlStorage) {}

  private first<T>(query: string, ...binds: unknown[]): T | null {
    return (this.sql.exec<Row>(query, ...binds).toArray()[0] as T | undefined) ?? null;
  }

  private all<T>(query: string, ...binds: unknown[]): T[] {
    return this.sql.exec<Row>(query, ...binds).toArray() as T[];
  }

  /** Rows written, index entries included: only "> 0" is meaningful. */
  private run(query: string, ...binds: unknown[]): number {
    return this.sql.exec(query, ...binds).rowsWritten;
  }

  // -- cluster

  cluster(): ClusterRow | null {
    if (!this.schemaReady) return null;
    if (this.#cluster === undefined) this.#cluster = this.first<ClusterRow>(`SELECT * FROM cluster WHERE id = 1`);
    return this.#cluster;
  }

  /** Drops every value kept in memory; after a rolled-back transaction they may hold uncommitted values. */
  forgetCached(): void {
    this.#cluster = undefined;
    this.#credentials.clear();
    this.#credentialsById.clear();
  }

  createCluster(name: string, issuer: string, policy: QueuePolicy, nowMs: number): void {
    this.forgetCached();
    this.run(
      `INSERT INTO cluster (id, name, issuer, created_at, max_in_flight, lease_seconds, admission_ttl_seconds, max_queue) VALUES (1, ?, ?, ?, ?, ?, ?, ?)`,
      name,
      issuer,
      nowMs,
      policy.maxInFlight,
      policy.leaseSeconds,
      policy.admissionTtlSeconds,
      policy.maxQueue,
    );
  }

  updateCluster(fields: Partial<Omit<ClusterRow, "name" | "issuer" | "created_at">>): void {
    const entries = Object.entries(fields);
    if (entries.length === 0) return;
    this.#cluster = undefined;
    this.run(`UPDATE cluster SET ${entries.map(([k]) => `${k} = ?`).join(", ")} WHERE id = 1`, ...entries.map(([, v]) => v));
  }

  /** The next queue position number: one past the highest ever given (retention keeps the newest ticket); one seek in the index on seq. */
  nextSeq(): number {
    return this.first<{ seq: number }>(`SELECT coalesce(max(seq), 0) + 1 AS seq FROM tickets`)!.seq;
  }

  // -- tickets

  ticket(id: string): TicketRow | null {
    return this.first<TicketRow>(`SELECT * FROM tickets WHERE id = ?`, id);
  }

  liveTicketOf(node: string): TicketRow | null {
    return this.first<TicketRow>(`SELECT * FROM tickets WHERE node = ? AND state IN ('queued', 'admitted')`, node);
  }

  /**
   * A node's live ticket and its membership. A node asking for the first time has neither, and
   * then this is one statement that returns no row; the rows themselves are read only if found.
   */
  nodeStanding(node: string): { live: TicketRow | null; member: MemberRow | null } {
    const found = this.all<{ k: 1 | 2 }>(
      `SELECT 1 AS k FROM tickets WHERE node = ?1 AND state IN ('queued', 'admitted') UNION ALL SELECT 2 FROM members WHERE node = ?1`,
      node,
    );
    return {
      live: found.some((r) => r.k === 1) ? this.liveTicketOf(node) : null,
      member: found.some((r) => r.k === 2) ? this.member(node) : null,
    };
  }

  latestTicketOf(node: string): TicketRow | null {
    return this.first<TicketRow>(`SELECT * FROM tickets WHERE node = ? ORDER BY seq DESC LIMIT 1`, node);
  }

  bootstrapTicket(): TicketRow | null {
    return this.first<TicketRow>(`SELECT * FROM tickets WHERE role = 'bootstrap' ORDER BY seq DESC LIMIT 1`);
  }

  /** A new queued ticket; returns the row as stored (the columns not given take their defaults). */
  insertTicket(t: Pick<TicketRow, "id" | "seq" | "node" | "peer_url" | "role" | "enrollment_token_id" | "created_at" | "exclusive_until_started">): TicketRow {
    this.run(
      `INSERT INTO tickets (id, seq, node, peer_url, role, state, enrollment_token_id, created_at, exclusive_until_started) VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?)`,
      t.id,
      t.seq,
      t.node,
      t.peer_url,
      t.role,
      t.enrollment_token_id,
      t.created_at,
      t.exclusive_until_started,
    );
    return {
      ...t,
      state: "queued",
      version: 1,
      admitted_at: null,
      lease_expires_at: null,
      jti: null,
      ended_at: null,
      end_reason: null,
      member_id: null,
      member_started_at: null,
    };
  }

  /** The admitted tickets (at most maxInFlight), through the index on state. */
  admittedTickets(): TicketRow[] {
    return this.all<TicketRow>(`SELECT * FROM tickets WHERE state = 'admitted' ORDER BY seq`);
  }

  /**
   * Compare-and-set on state (and, when given, on the version the caller read); bumps the version
   * that long polls watch. Returns whether it applied: callers must act on a false.
   */
  updateTicket(id: string, expected: TicketState, fields: Partial<Omit<TicketRow, "id" | "seq" | "version">>, expectedVersion?: number): boolean {
    const entries = Object.entries(fields);
    const versioned = expectedVersion === undefined ? "" : " AND version = ?";
    return (
      this.run(
        `UPDATE tickets SET ${[...entries.map(([k]) => `${k} = ?`), "version = version + 1"].join(", ")} WHERE id = ? AND state = ?${versioned}`,
        ...entries.map(([, v]) => v),
        id,
        expected,
        ...(expectedVersion === undefined ? [] : [expectedVersion]),
      ) > 0
    );
  }

  /** Records which enrollment token now holds the ticket; not a state change, so no new version. */
  setTicketEnrollment(id: string, enrollmentTokenId: string): boolean {
    return this.run(`UPDATE tickets SET enrollment_token_id = ? WHERE id = ?`, enrollmentTokenId, id) > 0;
  }

  /** How many tickets are queued, or admitted (holding a slot): one row kept by the triggers of migration 6. */
  liveCount(state: LiveState): number {
    return this.first<{ value: number }>(`SELECT value FROM counters WHERE name = ?`, `ticket.live.${state}`)!.value;
  }

  /** Both live counts in one read. */
  liveCounts(): Record<LiveState, number> {
    const rows = this.all<{ name: string; value: number }>(`SELECT name, value FROM counters WHERE name IN ('ticket.live.queued', 'ticket.live.admitted')`);
    const count = (state: LiveState) => rows.find((r) => r.name === `ticket.live.${state}`)!.value;
    return { queued: count("queued"), admitted: count("admitted") };
  }

  /**
   * 1 for the ticket that is next to be admitted. The newest ticket is last in line: its position
   * is the queued count, without counting the queue (SQLite evaluates only the branch taken).
   */
  position(seq: number): number {
    return this.first<{ n: number }>(
      `SELECT CASE WHEN ?1 = (SELECT max(seq) FROM tickets) THEN (SELECT value FROM counters WHERE name = 'ticket.live.queued')
         ELSE (SELECT count(*) FROM tickets WHERE state = 'queued' AND seq <= ?1) END AS n`,
      seq,
    )!.n;
  }

  queuedOfRole(role: Role, limit: number): TicketRow[] {
    return this.all<TicketRow>(`SELECT * FROM tickets WHERE state = 'queued' AND role = ? ORDER BY seq LIMIT ?`, role, limit);
  }

  dueLeases(nowMs: number): TicketRow[] {
    return this.all<TicketRow>(`SELECT * FROM tickets WHERE state = 'admitted' AND lease_expires_at <= ? ORDER BY seq`, nowMs);
  }

  /** Reads the admitted tickets only (at most maxInFlight), through the index on state. */
  earliestLeaseEnd(): number | null {
    return this.first<{ t: number | null }>(`SELECT min(lease_expires_at) AS t FROM tickets WHERE state = 'admitted'`)?.t ?? null;
  }

  listTickets(state: TicketState | null, limit: number, afterSeq: number): TicketRow[] {
    return state
      ? this.all<TicketRow>(`SELECT * FROM tickets WHERE state = ? AND seq > ? ORDER BY seq LIMIT ?`, state, afterSeq, limit)
      : this.all<TicketRow>(`SELECT * FROM tickets WHERE seq > ? ORDER BY seq LIMIT ?`, afterSeq, limit);
  }

  // -- admissions

  admission(jti: string): AdmissionRow | null {
    return this.first<AdmissionRow>(`SELECT * FROM admissions WHERE jti = ?`, jti);
  }

  insertAdmission(a: Omit<AdmissionRow, "status" | "ended_at" | "reason">): void {
    this.run(
      `INSERT INTO admissions (jti, ticket_id, node, kid, token, issued_at, expires_at, status) VALUES (?, ?, ?, ?, ?, ?, ?, 'active')`,
      a.jti,
      a.ticket_id,
      a.node,
      a.kid,
      a.token,
      a.issued_at,
      a.expires_at,
    );
  }

  endAdmission(jti: string, status: Exclude<AdmissionStatus, "active">, reason: string, nowMs: number): boolean {
    return this.run(`UPDATE admissions SET status = ?, reason = ?, ended_at = ? WHERE jti = ? AND status = 'active'`, status, reason, nowMs, jti) > 0;
  }

  /** Admission tokens no longer active but not yet expired: what verifiers must refuse. */
  inactiveUnexpired(nowSeconds: number): Pick<AdmissionRow, "jti" | "expires_at" | "status">[] {
    return this.all(`SELECT jti, expires_at, status FROM admissions WHERE status <> 'active' AND expires_at > ? ORDER BY jti`, nowSeconds);
  }

  latestAdmissionExpiry(kid: string): number | null {
    return this.first<{ t: number | null }>(`SELECT max(expires_at) AS t FROM admissions WHERE kid = ?`, kid)?.t ?? null;
  }

  // -- enrollment tokens

  enrollmentCredential(hash: string): EnrollmentCredential | null {
    const known = this.#credentials.get(hash);
    if (known) return known;
    const row = this.first<EnrollmentCredential>(`SELECT ${CREDENTIAL_COLUMNS} FROM enrollment_tokens WHERE token_hash = ?`, hash);
    if (row) {
      this.#credentials.set(hash, row);
      this.#credentialsById.set(row.id, row);
    }
    return row;
  }

  /** Whether the enrollment token may still be used for a new ticket (its use limit not reached): read, since each ticket insert counts a use. */
  enrollmentUseLeft(id: string): boolean {
    const t = this.first<Pick<EnrollmentTokenRow, "max_uses" | "uses">>(`SELECT max_uses, uses FROM enrollment_tokens WHERE id = ?`, id);
    return t !== null && (t.max_uses === null || t.uses < t.max_uses);
  }

  /** Whether the enrollment token `id` still authenticates at `nowMs` (neither revoked, expired nor deleted). */
  enrollmentValid(id: string, nowMs: number): boolean {
    const t = this.#credentialsById.get(id) ?? this.first<EnrollmentCredential>(`SELECT ${CREDENTIAL_COLUMNS} FROM enrollment_tokens WHERE id = ?`, id);
    return t !== null && t.revoked_at === null && (t.expires_at === null || t.expires_at > nowMs);
  }

  enrollmentToken(id: string): EnrollmentTokenRow | null {
    return this.first<EnrollmentTokenRow>(`SELECT * FROM enrollment_tokens WHERE id = ?`, id);
  }

  insertEnrollmentToken(t: Omit<EnrollmentTokenRow, "uses" | "revoked_at">): void {
    this.run(
      `INSERT INTO enrollment_tokens (id, token_hash, description, created_at, expires_at, max_uses, nodes, peer_hosts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      t.id,
      t.token_hash,
      t.description,
      t.created_at,
      t.expires_at,
      t.max_uses,
      t.nodes,
      t.peer_hosts,
    );
  }

  listEnrollmentTokens(): EnrollmentTokenRow[] {
    return this.all<EnrollmentTokenRow>(`SELECT * FROM enrollment_tokens ORDER BY created_at, id`);
  }

  revokeEnrollmentToken(id: string, nowMs: number): boolean {
    this.#credentials.clear();
    this.#credentialsById.clear();
    return this.run(`UPDATE enrollment_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, nowMs, id) > 0;
  }

  // -- signing keys

  currentKey(): SigningKeyRow | null {
    return this.first<SigningKeyRow>(`SELECT * FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC LIMIT 1`);
  }

  key(kid: string): SigningKeyRow | null {
    return this.first<SigningKeyRow>(`SELECT * FROM signing_keys WHERE kid = ?`, kid);
  }

  /** The current key and every retired key that may still have signed an unexpired token. */
  publishedKeys(nowMs: number): SigningKeyRow[] {
    return this.all<SigningKeyRow>(`SELECT * FROM signing_keys WHERE retired_at IS NULL OR keep_until > ? ORDER BY created_at DESC`, nowMs);
  }

  insertKey(k: Pick<SigningKeyRow, "kid" | "private_jwk" | "public_jwk" | "created_at">): void {
    this.run(`INSERT INTO signing_keys (kid, private_jwk, public_jwk, created_at) VALUES (?, ?, ?, ?)`, k.kid, k.private_jwk, k.public_jwk, k.created_at);
  }

  retireKey(kid: string, nowMs: number, keepUntilMs: number): void {
    this.run(`UPDATE signing_keys SET retired_at = ?, keep_until = ? WHERE kid = ?`, nowMs, keepUntilMs, kid);
  }

  // -- members

  member(node: string): MemberRow | null {
    return this.first<MemberRow>(`SELECT * FROM members WHERE node = ?`, node);
  }

  memberByPeerUrl(peerURL: string): MemberRow | null {
    return this.first<MemberRow>(`SELECT * FROM members WHERE peer_url = ?`, peerURL);
  }

  members(): MemberRow[] {
    return this.all<MemberRow>(`SELECT * FROM members ORDER BY joined_at, node`);
  }

  upsertMember(m: MemberRow): void {
    this.run(
      `INSERT INTO members (node, peer_url, member_id, source, joined_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (node) DO UPDATE SET peer_url = excluded.peer_url, member_id = excluded.member_id, source = excluded.source, joined_at = excluded.joined_at`,
      m.node,
      m.peer_url,
      m.member_id,
      m.source,
      m.joined_at,
    );
  }

  deleteMember(node: string): boolean {
    return this.run(`DELETE FROM members WHERE node = ?`, node) > 0;
  }

  // -- metrics

  /**
   * Counters kept by the writes themselves (triggers of migration 3), so that a scrape reads a
   * few rows instead of scanning history, and retention does not reset them.
   */
  metricsSnapshot(bucketsSeconds: readonly number[]): MetricsSnapshot {
    const counters = new Map(this.all<{ name: string; value: number }>(`SELECT name, value FROM counters`).map((r) => [r.name, Number(r.value)]));
    const c = (name: string) => counters.get(name) ?? 0;
    const ended = ["joined", "expired", "abandoned", "revoked"] as const;
    return {
      admissionsByStatus: Object.fromEntries((["completed", "expired", "abandoned", "revoked"] as const).map((s) => [s, c(`admission.ended.${s}`)])),
      admissionsByRole: { bootstrap: c("admitted.bootstrap"), join: c("admitted.join") },
      ticketsByState: { ...this.liveCounts(), ...Object.fromEntries(ended.map((s) => [s, c(`ticket.ended.${s}`)])) },
      members: this.first<{ n: number }>(`SELECT count(*) AS n FROM members`)!.n,
      wait: {
        count: c("wait.count"),
        sumSeconds: c("wait.sum_ms") / 1000,
        cumulative: bucketsSeconds.map((_, i) => c(`wait.le.${i}`)),
      },
    };
  }

  // -- retention

  /**
   * Deletes history older than its window: ended tickets and admissions, expired or revoked
   * enrollment tokens, retired keys that signed nothing still unexpired, old audit rows.
   * The newest ticket and audit row are kept so that `seq` (a rowid) keeps increasing, and so
   * is the bootstrap ticket of a cluster that was never bootstrapped nor adopted: its node takes
   * it back without a new use of an enrollment token (which `maxUses` may no longer allow).
   */
  deleteHistory(c: {
    ticketsEndedBefore: number;
    admissionsEndedBefore: number;
    nowMs: number;
    enrollmentTokensEndedBefore: number;
    auditBefore: number;
  }): Record<string, number> {
    const deleted = (query: string, ...binds: unknown[]) => this.sql.exec(`${query} RETURNING 1`, ...binds).toArray().length;
    const tickets = deleted(
      `DELETE FROM tickets WHERE state IN ('joined', 'expired', 'abandoned', 'revoked') AND ended_at < ? AND seq < (SELECT max(seq) FROM tickets)
         AND NOT (role = 'bootstrap' AND EXISTS (SELECT 1 FROM cluster WHERE id = 1 AND bootstrapped = 0 AND adopted = 0 AND bootstrap_node = tickets.node))`,
      c.ticketsEndedBefore,
    );
    // An ended admission stays on the revocation list until its token's exp, whatever the window.
    const admissions = deleted(
      `DELETE FROM admissions WHERE status <> 'active' AND expires_at < ? AND ended_at < ?`,
      Math.floor(c.nowMs / 1000),
      c.admissionsEndedBefore,
    );
    const enrollmentTokens = deleted(
      `DELETE FROM enrollment_tokens WHERE (expires_at IS NOT NULL AND expires_at < ?1) OR (revoked_at IS NOT NULL AND revoked_at < ?1)`,
      c.enrollmentTokensEndedBefore,
    );
    const keys = deleted(`DELETE FROM signing_keys WHERE retired_at IS NOT NULL AND keep_until <= ?`, c.nowMs);
    // Audit rows are appended in time order: everything before the first row still inside the window goes.
    const boundary = this.first<{ seq: number }>(`SELECT seq FROM audit_log WHERE at >= ? ORDER BY seq LIMIT 1`, c.auditBefore)?.seq ?? this.lastAuditSeq();
    const audit = deleted(`DELETE FROM audit_log WHERE seq < ?`, boundary);
    if (enrollmentTokens > 0) {
      this.#credentials.clear();
      this.#credentialsById.clear();
    }
    return { tickets, admissions, enrollmentTokens, keys, audit };
  }

  // -- audit

  audit(at: number, actor: string, action: string, subject: string, detail: Record<string, unknown> = {}): void {
    this.run(`INSERT INTO audit_log (at, actor, action, subject, detail) VALUES (?, ?, ?, ?, ?)`, at, actor, action, subject, JSON.stringify(detail));
  }

  auditAfter(afterSeq: number, limit: number): AuditRow[] {
    return this.all<AuditRow>(`SELECT * FROM audit_log WHERE seq > ? ORDER BY seq LIMIT ?`, afterSeq, limit);
  }

  lastAuditSeq(): number {
    return this.first<{ s: number | null }>(`SELECT max(seq) AS s FROM audit_log`)?.s ?? 0;
  }
}

export function clusterFacts(c: ClusterRow): ClusterFacts {
  return {
    bootstrapped: c.bootstrapped === 1,
    adopted: c.adopted === 1,
    bootstrapNode: c.bootstrap_node,
    paused: c.paused === 1,
    restored: c.restored_at !== null,
  };
}

export function startFacts(t: TicketRow): StartFacts {
  return { exclusiveUntilStarted: t.exclusive_until_started === 1, started: t.member_started_at !== null };
}

export function clusterPolicy(c: ClusterRow): QueuePolicy {
  return { maxInFlight: c.max_in_flight, leaseSeconds: c.lease_seconds, admissionTtlSeconds: c.admission_ttl_seconds, maxQueue: c.max_queue };
}
