/**
 * JoinQueue: one Durable Object per cluster, the single writer of that cluster's join queue.
 *
 * It stores everything in SQLite (see schema.ts), applies the rules of policy.ts, and signs
 * admission tokens with keys that never leave it. Every state change is written together with
 * its audit row in one `transactionSync`, and logged at its level (event-log.ts) once committed.
 * Lease expiry runs on one alarm armed at the earliest lease end; it is also applied lazily at
 * the start of every call, so a late alarm never keeps an expired admission active. Long polls
 * wait here, in memory, and are woken by the change.
 *
 * RPC methods return an `Outcome` union for every expected result instead of throwing.
 * @module
 */
import { DurableObject } from "cloudflare:workers";
import type { JWK, JWTPayload } from "jose";
import {
  DEFAULT_POLICY,
  admittableRole,
  decideTicketRequest,
  estimatedWaitSeconds,
  freeSlots,
  leaseEnd,
  needsBootstrap,
  retryAfterSeconds,
  validatePolicy,
  type QueuePolicy,
  type Role,
  type TicketState,
} from "./policy.ts";
import { Credentials, type Principal } from "./credentials.ts";
import { actionLevel, isLogged, parseLogLevel, type LogLevel } from "./event-log.ts";
import { WAIT_BUCKETS_SECONDS, renderMetrics } from "./metrics.ts";
import { hasSchema, migrate, SCHEMA_VERSION } from "./schema.ts";
import { Waiters } from "./waiters.ts";
import { QueueStore, clusterFacts, clusterPolicy, type AdmissionRow, type ClusterRow, type TicketRow } from "./store.ts";
import {
  adminTicketView,
  auditView,
  enrollmentTokenView,
  fail,
  iso,
  memberView,
  ticketEtag,
  ticketView,
  type Failure,
  type Outcome,
  type TicketView,
} from "./views.ts";
import { admissionClaims } from "../tokens/claims.ts";
import { generateSigningKey, signAdmission } from "../tokens/keys.ts";
import { newEnrollmentToken, randomId, sha256Hex } from "../tokens/secrets.ts";

export type IntrospectResult =
  | { active: true; claims: JWTPayload }
  | { active: false; reason: "revoked" | "expired" | "completed" | "abandoned" | "invalid" | "unknown_cluster" | "superseded" | "unknown" };

export interface EnrollmentTokenInput {
  ttlSeconds?: number;
  maxUses?: number;
  description?: string;
}

const LONG_POLL_MAX_MS = 30_000;
/** Waiter key for audit followers: every transaction writes an audit row. */
const AUDIT_WAITERS = "*audit";
const UNKNOWN_CLUSTER = (cluster: string) => fail(404, "unknown_cluster", `cluster ${cluster} does not exist on this broker (an admin creates it with its first enrollment token)`);

export class JoinQueue extends DurableObject<Env> {
  readonly #store: QueueStore;
  readonly #waiters = new Waiters();
  readonly #credentials: Credentials;
  #admitting: Promise<unknown> = Promise.resolve();
  #pendingLogs: { level: "debug" | "info"; entry: Record<string, unknown> }[] = [];
  /** Which state changes are logged (LOG_LEVEL); protected so that the bench can switch it. */
  protected logLevel: LogLevel;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.logLevel = parseLogLevel(env.LOG_LEVEL);
    this.#store = new QueueStore(ctx.storage.sql);
    this.#credentials = new Credentials(this.#store);
    // Reads of a cluster that does not exist must not create storage: the schema is created with
    // the cluster (ensureCluster), and upgraded here for objects that have one.
    void ctx.blockConcurrencyWhile(async () => {
      if (hasSchema(ctx.storage)) this.#migrate();
    });
  }

  // ---------------------------------------------------------------- node-facing

  async requestTicket(input: { cluster: string; bearer: string; node: string; peerURL: string }): Promise<Outcome<TicketView>> {
    const cluster = this.#store.cluster();
    if (!cluster) return fail(401, "unauthorized", "unknown enrollment token");
    const principal = await this.#credentials.authenticate(input.bearer, Date.now());
    if (!principal.ok) return principal;
    if (principal.value.kind !== "enrollment") return fail(403, "wrong_token_kind", "tickets are requested with an enrollment token, not an admission token");
    const enrollment = principal.value;
    await this.#settle();

    const now = Date.now();
    const c = this.#store.cluster()!;
    const { live, member } = this.#store.nodeStanding(input.node);
    const decision = decideTicketRequest({
      cluster: clusterFacts(c),
      node: input.node,
      peerURL: input.peerURL,
      live: live && { peerURL: live.peer_url },
      member: member && { peerURL: member.peer_url },
      queuedCount: this.#store.liveCount("queued"),
      policy: clusterPolicy(c),
    });

    let ticketId: string;
    let known: TicketRow | undefined;
    let created = false;
    switch (decision.kind) {
      case "existing":
        ticketId = live!.id;
        if (live!.enrollment_token_id !== enrollment.id) this.#store.setTicketEnrollment(live!.id, enrollment.id);
        else known = live!;
        break;
      case "already_joined": {
        const last = this.#store.latestTicketOf(input.node);
        if (!last || last.state !== "joined") {
          // Adopted members have no ticket: answer with a synthetic joined view.
          return { ok: true, status: 200, value: this.#joinedWithoutTicket(c, member!) };
        }
        ticketId = last.id;
        break;
      }
      case "peer_url_conflict": {
        const held = decision.heldBy === "ticket" ? live!.peer_url : member!.peer_url;
        return fail(409, "peer_url_conflict", `node ${input.node} already holds ${decision.heldBy === "ticket" ? "a live ticket" : "membership"} with peerURL ${held}`);
      }
      case "queue_full":
        return fail(503, "queue_full", `the join queue of ${c.name} is full (maxQueue ${c.max_queue})`, 30);
      case "revive_bootstrap":
      case "new": {
        const latest = decision.kind === "revive_bootstrap" ? this.#store.latestTicketOf(input.node) : null;
        const previous = latest?.role === "bootstrap" ? latest : null;
        if (previous && previous.peer_url !== input.peerURL) {
          return fail(409, "peer_url_conflict", `node ${input.node} holds the bootstrap ticket with peerURL ${previous.peer_url}`);
        }
        const role: Role = decision.kind === "new" ? decision.role : "bootstrap";
        const written = this.#transact((): { id: string; row?: TicketRow } | null => {
          // The bootstrap ticket coming back to its node is not a new use of the enrollment token.
          if (!previous && !this.#store.enrollmentUseLeft(enrollment.id)) return null;
          if (previous) {
            this.#store.updateTicket(previous.id, previous.state, {
              state: "queued", enrollment_token_id: enrollment.id, ended_at: null, end_reason: null, jti: null, lease_expires_at: null,
            });
            this.#record(now, `node:${input.node}`, "ticket.bootstrap_returned", previous.id, { node: input.node, previousState: previous.state });
            return { id: previous.id };
          }
          const fresh = randomId("tkt_");
          const row = this.#store.insertTicket({ id: fresh, seq: this.#store.nextSeq(), node: input.node, peer_url: input.peerURL, role, enrollment_token_id: enrollment.id, created_at: now });
          if (role === "bootstrap") this.#store.updateCluster({ bootstrap_node: input.node });
          this.#record(now, `node:${input.node}`, "ticket.created", fresh, { node: input.node, peerURL: input.peerURL, role, enrollmentToken: enrollment.id });
          return { id: fresh, row };
        });
        if (written === null) return fail(403, "enrollment_token_exhausted", "the enrollment token has reached its use limit");
        ticketId = written.id;
        created = true;
        const admitted = await this.#admitWaiting();
        // Only an admission can have changed the ticket since it was written.
        if (!admitted.includes(ticketId)) known = written.row;
        break;
      }
    }
    const row = known ?? this.#store.ticket(ticketId)!;
    return this.#viewOutcome(row, created ? 201 : 200);
  }

  async getTicket(input: { bearer: string; ticket: string; waitSeconds: number; ifNoneMatch: string | null }): Promise<Outcome<TicketView>> {
    const access = await this.#ticketAccess(input.bearer, input.ticket, ["enrollment", "admission"]);
    if (!access.ok) return access;
    await this.#settle();
    let row = this.#store.ticket(input.ticket)!;
    const waitMs = Math.min(LONG_POLL_MAX_MS, Math.max(0, input.waitSeconds * 1000));
    const unchanged = input.ifNoneMatch ? input.ifNoneMatch === ticketEtag(row) : row.state === "queued";
    if (waitMs > 0 && unchanged) {
      await this.#waiters.wait(row.id, waitMs);
      await this.#settle();
      row = this.#store.ticket(input.ticket)!;
    }
    return this.#viewOutcome(row, 200);
  }

  async heartbeat(input: { bearer: string; ticket: string }): Promise<Outcome<TicketView>> {
    const access = await this.#currentAdmission(input.bearer, input.ticket);
    if (!access.ok) return access;
    const { row, admission } = access.value;
    const c = this.#store.cluster()!;
    const now = Date.now();
    const lease = leaseEnd(now, clusterPolicy(c), admission.expires_at);
    this.#transact(() => {
      this.#store.updateTicket(row.id, "admitted", { lease_expires_at: lease });
      this.#record(now, `node:${row.node}`, "lease.extended", row.id, { jti: row.jti, leaseExpiresAt: iso(lease) });
    });
    await this.#armAlarm();
    return this.#viewOutcome(this.#store.ticket(row.id)!, 200);
  }

  async complete(input: { bearer: string; ticket: string; memberID: string }): Promise<Outcome<TicketView>> {
    if (!this.#store.cluster()) return fail(401, "unauthorized", "unknown token");
    const ticket = this.#store.ticket(input.ticket);
    if (ticket?.state === "joined") {
      // A retried complete (the agent crashed before it saw the answer) is answered again.
      const access = await this.#ticketAccess(input.bearer, input.ticket, ["admission"]);
      if (!access.ok) return access;
      if (ticket.member_id !== input.memberID) return fail(409, "member_id_conflict", `ticket ${ticket.id} completed with member ${ticket.member_id}`);
      return this.#viewOutcome(ticket, 200);
    }
    const access = await this.#currentAdmission(input.bearer, input.ticket);
    if (!access.ok) return access;
    const { row } = access.value;
    const c = this.#store.cluster()!;
    const now = Date.now();
    this.#transact(() => {
      this.#store.updateTicket(row.id, "admitted", { state: "joined", member_id: input.memberID, ended_at: now, lease_expires_at: null });
      this.#store.endAdmission(row.jti!, "completed", "member joined", now);
      this.#store.upsertMember({ node: row.node, peer_url: row.peer_url, member_id: input.memberID, source: row.role === "bootstrap" ? "bootstrap" : "join", joined_at: now });
      const took = now - (row.admitted_at ?? now);
      const typical = c.typical_admission_ms === 0 ? took : Math.round(c.typical_admission_ms * 0.7 + took * 0.3);
      this.#store.updateCluster(row.role === "bootstrap" ? { bootstrapped: 1, typical_admission_ms: typical } : { typical_admission_ms: typical });
      this.#record(now, `node:${row.node}`, "ticket.joined", row.id, { node: row.node, memberID: input.memberID, role: row.role, jti: row.jti });
      if (row.role === "bootstrap") this.#record(now, `node:${row.node}`, "cluster.bootstrapped", c.name, { node: row.node, memberID: input.memberID });
    });
    this.#waiters.notify([row.id]);
    await this.#admitWaiting();
    await this.#armAlarm();
    return this.#viewOutcome(this.#store.ticket(row.id)!, 200);
  }

  async abandon(input: { bearer: string; ticket: string }): Promise<Outcome<TicketView>> {
    const access = await this.#ticketAccess(input.bearer, input.ticket, ["enrollment", "admission"]);
    if (!access.ok) return access;
    await this.#settle();
    const row = this.#store.ticket(input.ticket)!;
    if (row.state !== "queued" && row.state !== "admitted") return this.#viewOutcome(row, 200);
    const now = Date.now();
    this.#transact(() => {
      this.#store.updateTicket(row.id, row.state, { state: "abandoned", ended_at: now, end_reason: "abandoned by the node", lease_expires_at: null });
      if (row.state === "admitted" && row.jti) this.#store.endAdmission(row.jti, "abandoned", "abandoned by the node", now);
      this.#record(now, `node:${row.node}`, "ticket.abandoned", row.id, { node: row.node, previousState: row.state, jti: row.jti });
    });
    this.#waiters.notify([row.id]);
    await this.#admitWaiting();
    await this.#armAlarm();
    return this.#viewOutcome(this.#store.ticket(row.id)!, 200);
  }

  // ---------------------------------------------------------------- controller-facing

  async jwks(): Promise<Outcome<{ keys: JWK[] }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const keys = this.#store.publishedKeys(Date.now()).map((k) => JSON.parse(k.public_jwk) as JWK);
    return { ok: true, status: 200, value: { keys } };
  }

  async revocations(): Promise<Outcome<{ revoked: { jti: string; exp: number; reason: string }[] }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    await this.#settle();
    const revoked = this.#store.inactiveUnexpired(Math.floor(Date.now() / 1000)).map((r) => ({ jti: r.jti, exp: r.expires_at, reason: r.status }));
    const etag = `W/"${(await sha256Hex(JSON.stringify(revoked))).slice(0, 32)}"`;
    return { ok: true, status: 200, value: { revoked }, etag };
  }

  async introspect(token: string): Promise<IntrospectResult> {
    if (!this.#store.cluster()) return { active: false, reason: "unknown_cluster" };
    await this.#settle();
    const verified = await this.#credentials.verifyAdmission(token);
    if (!verified) return { active: false, reason: "invalid" };
    const { payload } = verified;
    if (verified.expired) return { active: false, reason: "expired" };
    const admission = this.#store.admission(String(payload.jti));
    if (!admission) return { active: false, reason: "unknown" };
    if (admission.status !== "active") return { active: false, reason: admission.status === "abandoned" ? "abandoned" : admission.status };
    const ticket = this.#store.ticket(admission.ticket_id);
    if (!ticket || ticket.state !== "admitted" || ticket.jti !== admission.jti) return { active: false, reason: "superseded" };
    return { active: true, claims: payload };
  }

  // ---------------------------------------------------------------- admin

  async createEnrollmentToken(cluster: string, issuer: string, input: EnrollmentTokenInput): Promise<Outcome<{ id: string; token: string; expiresAt: string | null; maxUses: number | null; description?: string }>> {
    await this.#ensureCluster(cluster, issuer);
    const now = Date.now();
    const token = newEnrollmentToken();
    const id = randomId("enr_", 9);
    const expiresAt = input.ttlSeconds ? now + input.ttlSeconds * 1000 : null;
    const hash = await sha256Hex(token);
    this.#transact(() => {
      this.#store.insertEnrollmentToken({ id, token_hash: hash, description: input.description ?? null, created_at: now, expires_at: expiresAt, max_uses: input.maxUses ?? null });
      this.#record(now, "admin", "enrollment_token.created", id, { expiresAt: iso(expiresAt), maxUses: input.maxUses ?? null, description: input.description ?? null });
    });
    return { ok: true, status: 201, value: { id, token, expiresAt: iso(expiresAt) ?? null, maxUses: input.maxUses ?? null, description: input.description } };
  }

  async listEnrollmentTokens(): Promise<Outcome<{ tokens: ReturnType<typeof enrollmentTokenView>[] }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const now = Date.now();
    return { ok: true, status: 200, value: { tokens: this.#store.listEnrollmentTokens().map((t) => enrollmentTokenView(t, now)) } };
  }

  async revokeEnrollmentToken(id: string): Promise<Outcome<ReturnType<typeof enrollmentTokenView>>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const row = this.#store.enrollmentToken(id);
    if (!row) return fail(404, "enrollment_token_not_found", `no enrollment token ${id}`);
    const now = Date.now();
    this.#transact(() => {
      if (this.#store.revokeEnrollmentToken(id, now)) this.#record(now, "admin", "enrollment_token.revoked", id, {});
    });
    return { ok: true, status: 200, value: enrollmentTokenView(this.#store.enrollmentToken(id)!, now) };
  }

  async status(): Promise<Outcome<Record<string, unknown>>> {
    const c = this.#store.cluster();
    if (!c) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    await this.#settle();
    const admitted = this.#store.listTickets("admitted", 100, 0);
    const current = this.#store.currentKey();
    return {
      ok: true,
      status: 200,
      value: {
        cluster: c.name,
        issuer: this.#issuer(c),
        createdAt: iso(c.created_at),
        bootstrapped: c.bootstrapped === 1,
        adopted: c.adopted === 1,
        bootstrapNode: c.bootstrap_node,
        paused: c.paused === 1,
        policy: clusterPolicy(c),
        queue: { queued: this.#store.liveCount("queued"), admitted: this.#store.liveCount("admitted") },
        inFlight: admitted.map((t) => adminTicketView(c.name, t)),
        members: this.#store.members().map(memberView),
        signingKey: current?.kid ?? null,
        typicalAdmissionSeconds: Math.round(c.typical_admission_ms / 100) / 10,
        schemaVersion: SCHEMA_VERSION,
      },
    };
  }

  async metrics(): Promise<Outcome<string>> {
    const c = this.#store.cluster();
    if (!c) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    await this.#settle();
    const snapshot = this.#store.metricsSnapshot(WAIT_BUCKETS_SECONDS);
    return { ok: true, status: 200, value: renderMetrics({ cluster: c.name, paused: c.paused === 1, bootstrapped: c.bootstrapped === 1 || c.adopted === 1, maxInFlight: c.max_in_flight, snapshot }) };
  }

  async listTickets(input: { state: TicketState | null; limit: number; after: number }): Promise<Outcome<{ tickets: ReturnType<typeof adminTicketView>[]; next: number | null }>> {
    const c = this.#store.cluster();
    if (!c) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    await this.#settle();
    const rows = this.#store.listTickets(input.state, input.limit, input.after);
    const next = rows.length === input.limit ? rows[rows.length - 1].seq : null;
    return { ok: true, status: 200, value: { tickets: rows.map((t) => adminTicketView(c.name, t)), next } };
  }

  async revokeAdmission(input: { jti: string; reason: string }): Promise<Outcome<{ jti: string; ticket: string; node: string; status: string; changed: boolean }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    await this.#settle();
    const admission = this.#store.admission(input.jti);
    if (!admission) return fail(404, "admission_not_found", `no admission token with jti ${input.jti}`);
    const now = Date.now();
    const changed = this.#transact(() => {
      if (!this.#store.endAdmission(admission.jti, "revoked", input.reason, now)) return false;
      const ticket = this.#store.ticket(admission.ticket_id);
      if (ticket?.state === "admitted" && ticket.jti === admission.jti) {
        this.#store.updateTicket(ticket.id, "admitted", { state: "revoked", ended_at: now, end_reason: `revoked: ${input.reason}`, lease_expires_at: null });
      }
      this.#record(now, "admin", "admission.revoked", admission.jti, { ticket: admission.ticket_id, node: admission.node, reason: input.reason });
      return true;
    });
    if (changed) {
      this.#waiters.notify([admission.ticket_id]);
      await this.#admitWaiting();
      await this.#armAlarm();
    }
    const after = this.#store.admission(input.jti)!;
    return { ok: true, status: 200, value: { jti: after.jti, ticket: after.ticket_id, node: after.node, status: after.status, changed } };
  }

  async setPaused(cluster: string, issuer: string, paused: boolean): Promise<Outcome<{ paused: boolean }>> {
    await this.#ensureCluster(cluster, issuer);
    const now = Date.now();
    this.#transact(() => {
      this.#store.updateCluster({ paused: paused ? 1 : 0 });
      this.#record(now, "admin", paused ? "cluster.paused" : "cluster.resumed", cluster, {});
    });
    if (!paused) await this.#admitWaiting();
    return { ok: true, status: 200, value: { paused } };
  }

  async setPolicy(cluster: string, issuer: string, patch: Partial<QueuePolicy>): Promise<Outcome<QueuePolicy>> {
    await this.#ensureCluster(cluster, issuer);
    const c = this.#store.cluster()!;
    const next = { ...clusterPolicy(c), ...patch };
    const problem = validatePolicy(next);
    if (problem) return fail(400, "invalid_request", problem);
    const now = Date.now();
    this.#transact(() => {
      this.#store.updateCluster({ max_in_flight: next.maxInFlight, lease_seconds: next.leaseSeconds, admission_ttl_seconds: next.admissionTtlSeconds, max_queue: next.maxQueue });
      this.#record(now, "admin", "policy.changed", cluster, { from: clusterPolicy(c), to: next });
    });
    await this.#admitWaiting();
    return { ok: true, status: 200, value: next };
  }

  async rotateKeys(): Promise<Outcome<{ kid: string; retired: string | null; keys: string[] }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const fresh = await generateSigningKey();
    const now = Date.now();
    const retired = this.#transact(() => {
      const old = this.#store.currentKey();
      if (old) {
        // Keep the old public key published until every token it signed has expired.
        const lastExp = this.#store.latestAdmissionExpiry(old.kid);
        this.#store.retireKey(old.kid, now, Math.max(now, (lastExp ?? 0) * 1000));
      }
      this.#store.insertKey({ kid: fresh.kid, private_jwk: JSON.stringify(fresh.privateJwk), public_jwk: JSON.stringify(fresh.publicJwk), created_at: now + 1 });
      this.#record(now, "admin", "keys.rotated", fresh.kid, { retired: old?.kid ?? null });
      return old?.kid ?? null;
    });
    const keys = this.#store.publishedKeys(now).map((k) => k.kid);
    return { ok: true, status: 200, value: { kid: fresh.kid, retired, keys } };
  }

  async adopt(cluster: string, issuer: string, members: { node: string; peerURL: string }[]): Promise<Outcome<{ adopted: number; members: ReturnType<typeof memberView>[] }>> {
    await this.#ensureCluster(cluster, issuer);
    const c = this.#store.cluster()!;
    if (!c.bootstrapped && c.bootstrap_node !== null) {
      return fail(409, "bootstrap_in_progress", `node ${c.bootstrap_node} already holds this cluster's bootstrap ticket; adopt an existing cluster before any node asks for a ticket`);
    }
    const now = Date.now();
    const conflict = members.find((m) => this.#store.liveTicketOf(m.node));
    if (conflict) return fail(409, "node_has_live_ticket", `node ${conflict.node} has a live ticket; abandon it before adopting the node`);
    this.#transact(() => {
      this.#store.updateCluster({ adopted: 1 });
      for (const m of members) this.#store.upsertMember({ node: m.node, peer_url: m.peerURL, member_id: null, source: "adopt", joined_at: now });
      this.#record(now, "admin", "cluster.adopted", cluster, { members });
    });
    await this.#admitWaiting();
    return { ok: true, status: 200, value: { adopted: members.length, members: this.#store.members().map(memberView) } };
  }

  async forgetMember(node: string): Promise<Outcome<{ forgotten: string }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const member = this.#store.member(node);
    if (!member) return fail(404, "member_not_found", `node ${node} is not a member of this cluster`);
    const now = Date.now();
    this.#transact(() => {
      this.#store.deleteMember(node);
      this.#record(now, "admin", "member.forgotten", node, { peerURL: member.peer_url, memberID: member.member_id });
    });
    return { ok: true, status: 200, value: { forgotten: node } };
  }

  /** Hands the bootstrap ticket to another node: an explicit admin act, never a timeout. */
  async reassignBootstrap(input: { node: string; reason: string }): Promise<Outcome<{ bootstrapNode: string; revoked: string | null }>> {
    const c = this.#store.cluster();
    if (!c) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    if (!needsBootstrap(clusterFacts(c))) return fail(409, "already_bootstrapped", "the cluster is already bootstrapped or adopted: there is no bootstrap ticket to hand over");
    const now = Date.now();
    const revoked = this.#transact(() => {
      let revokedJti: string | null = null;
      const old = c.bootstrap_node ? this.#store.liveTicketOf(c.bootstrap_node) : null;
      if (old && old.role === "bootstrap" && old.node !== input.node) {
        if (old.state === "admitted" && old.jti) {
          this.#store.endAdmission(old.jti, "revoked", `bootstrap reassigned: ${input.reason}`, now);
          revokedJti = old.jti;
        }
        this.#store.updateTicket(old.id, old.state, { state: "revoked", ended_at: now, end_reason: `bootstrap reassigned: ${input.reason}`, lease_expires_at: null });
      }
      const target = this.#store.liveTicketOf(input.node);
      if (target && target.role !== "bootstrap") this.#store.updateTicket(target.id, target.state, { role: "bootstrap" });
      this.#store.updateCluster({ bootstrap_node: input.node });
      this.#record(now, "admin", "bootstrap.reassigned", input.node, { from: c.bootstrap_node, reason: input.reason, revoked: revokedJti });
      return revokedJti;
    });
    this.#waiters.notifyAll();
    await this.#admitWaiting();
    await this.#armAlarm();
    return { ok: true, status: 200, value: { bootstrapNode: input.node, revoked } };
  }

  /** Audit entries after `after`; with `waitSeconds`, held until there is one (for `audit --follow`). */
  async audit(input: { after: number; limit: number; waitSeconds: number }): Promise<Outcome<{ entries: ReturnType<typeof auditView>[]; next: number }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    let rows = this.#store.auditAfter(input.after, input.limit);
    if (rows.length === 0 && input.waitSeconds > 0) {
      await this.#waiters.wait(AUDIT_WAITERS, Math.min(LONG_POLL_MAX_MS, input.waitSeconds * 1000));
      rows = this.#store.auditAfter(input.after, input.limit);
    }
    return { ok: true, status: 200, value: { entries: rows.map(auditView), next: rows.length ? rows[rows.length - 1].seq : input.after } };
  }

  // ---------------------------------------------------------------- alarm

  async alarm(): Promise<void> {
    await this.#settle();
    await this.#armAlarm();
  }

  // ---------------------------------------------------------------- internals

  #issuer(c: ClusterRow): string {
    return this.env.ISSUER || c.issuer;
  }

  /** Runs `fn` as one transaction; its audit rows become log lines only once it has committed. */
  #transact<T>(fn: () => T): T {
    this.#pendingLogs = [];
    let result: T;
    try {
      result = this.ctx.storage.transactionSync(fn);
    } catch (e) {
      this.#pendingLogs = [];
      this.#store.forgetCached();
      throw e;
    }
    const cluster = this.#store.cluster()?.name ?? this.ctx.id.name;
    for (const { level, entry } of this.#pendingLogs) {
      const line = JSON.stringify({ cluster, ...entry });
      if (level === "debug") console.debug(line);
      else console.log(line);
    }
    this.#pendingLogs = [];
    this.#waiters.notify([AUDIT_WAITERS]);
    return result;
  }

  /** An audit row, and (after commit, at its level) the matching structured log line for Workers Logs. */
  #record(at: number, actor: string, action: string, subject: string, detail: Record<string, unknown> = {}): void {
    this.#store.audit(at, actor, action, subject, detail);
    const level = actionLevel(action);
    if (isLogged(level, this.logLevel)) this.#pendingLogs.push({ level, entry: { event: action, time: new Date(at).toISOString(), actor, subject, ...detail } });
  }

  #migrate(): void {
    migrate(this.ctx.storage, Date.now());
    this.#store.schemaReady = true;
  }

  async #ensureCluster(cluster: string, issuer: string): Promise<void> {
    if (this.#store.cluster()) return;
    if (!this.#store.schemaReady) this.#migrate();
    const key = await generateSigningKey();
    const now = Date.now();
    this.#transact(() => {
      if (this.#store.cluster()) return; // created while the key was being generated
      this.#store.createCluster(cluster, issuer, DEFAULT_POLICY, now);
      this.#store.insertKey({ kid: key.kid, private_jwk: JSON.stringify(key.privateJwk), public_jwk: JSON.stringify(key.publicJwk), created_at: now });
      this.#record(now, "admin", "cluster.created", cluster, { issuer, policy: DEFAULT_POLICY, kid: key.kid });
    });
  }

  #joinedWithoutTicket(c: ClusterRow, m: { node: string; peer_url: string; member_id: string | null; joined_at: number }): TicketView {
    return { ticket: "", cluster: c.name, node: m.node, peerURL: m.peer_url, state: "joined", role: "join", memberID: m.member_id ?? undefined, reason: "adopted member", createdAt: iso(m.joined_at)! };
  }

  #viewOutcome(row: TicketRow, status: 200 | 201): Outcome<TicketView> {
    const c = this.#store.cluster()!;
    const policy = clusterPolicy(c);
    let queued;
    let admission;
    if (row.state === "queued") {
      const position = this.#store.position(row.seq);
      const typical = c.typical_admission_ms / 1000;
      queued = { position, retryAfter: retryAfterSeconds(position, typical, policy), estimatedWaitSeconds: estimatedWaitSeconds(position, typical, policy) };
    }
    if (row.state === "admitted" && row.jti) {
      const a = this.#store.admission(row.jti);
      if (a) admission = { token: a.token, expiresAt: a.expires_at };
    }
    const value = ticketView(c.name, row, { queued, admission, maxInFlight: policy.maxInFlight });
    if (queued) return { ok: true, status: 202, value, etag: ticketEtag(row), retryAfter: queued.retryAfter };
    return { ok: true, status, value, etag: ticketEtag(row) };
  }

  /** Applies what time has made due: expired leases end, and free slots are filled. */
  async #settle(): Promise<void> {
    if (!this.#store.cluster()) return;
    const now = Date.now();
    const earliest = this.#store.earliestLeaseEnd();
    const due = earliest !== null && earliest <= now ? this.#store.dueLeases(now) : [];
    if (due.length > 0) {
      this.#transact(() => {
        for (const t of due) {
          this.#store.updateTicket(t.id, "admitted", { state: "expired", ended_at: now, end_reason: "lease expired", lease_expires_at: null });
          if (t.jti) this.#store.endAdmission(t.jti, "expired", "lease expired", now);
          this.#record(now, "system", "lease.expired", t.id, { node: t.node, jti: t.jti, role: t.role });
        }
      });
      this.#waiters.notify(due.map((t) => t.id));
      await this.#armAlarm();
    }
    await this.#admitWaiting();
  }

  /**
   * Admits queued tickets into free slots; resolves to the tickets it admitted. Serialized:
   * signing is async, so two runs must not plan at once. With no free slot, or nobody queued,
   * there is nothing to plan (a run already under way cannot have planned a newer ticket).
   */
  #admitWaiting(): Promise<string[]> {
    if (!this.#openSlots()) return Promise.resolve([]);
    const run = this.#admitting.then(() => this.#admitOnce());
    this.#admitting = run.catch(() => undefined);
    return run;
  }

  /** The role that may be admitted now and how many slots are free, if any ticket is queued for them. */
  #openSlots(): { role: Role; slots: number } | null {
    const c = this.#store.cluster();
    if (!c || this.#store.liveCount("queued") === 0) return null;
    const facts = clusterFacts(c);
    const role = admittableRole(facts);
    const slots = freeSlots(this.#store.liveCount("admitted"), clusterPolicy(c), facts);
    return role === null || slots === 0 ? null : { role, slots };
  }

  async #admitOnce(): Promise<string[]> {
    const open = this.#openSlots();
    if (!open) return [];
    const c = this.#store.cluster()!;
    const candidates = this.#store.queuedOfRole(open.role, open.slots);
    if (candidates.length === 0) return [];

    const { kid, key } = await this.#credentials.signingKey();
    const now = Date.now();
    const issuer = this.#issuer(c);
    const policy = clusterPolicy(c);
    const signed = await Promise.all(
      candidates.map(async (t) => {
        const claims = admissionClaims({ issuer, cluster: c.name, node: t.node, ticket: t.id, peerURL: t.peer_url, role: t.role, jti: randomId("adm_", 15), nowMs: now, ttlSeconds: policy.admissionTtlSeconds });
        return { t, claims, token: await signAdmission(claims, kid, key) };
      }),
    );
    const admitted = this.#transact(() => {
      const done: string[] = [];
      for (const { t, claims, token } of signed) {
        const fresh = this.#store.cluster()!;
        if (freeSlots(this.#store.liveCount("admitted"), clusterPolicy(fresh), clusterFacts(fresh)) === 0) break;
        const lease = leaseEnd(now, clusterPolicy(fresh), claims.exp);
        if (!this.#store.updateTicket(t.id, "queued", { state: "admitted", admitted_at: now, lease_expires_at: lease, jti: claims.jti })) continue;
        this.#store.insertAdmission({ jti: claims.jti, ticket_id: t.id, node: t.node, kid, token, issued_at: claims.iat, expires_at: claims.exp });
        this.#record(now, "system", "ticket.admitted", t.id, { node: t.node, role: t.role, jti: claims.jti, exp: claims.exp, leaseExpiresAt: iso(lease) });
        done.push(t.id);
      }
      return done;
    });
    if (admitted.length > 0) {
      this.#waiters.notify(admitted);
      await this.#armAlarm();
    }
    return admitted;
  }

  async #armAlarm(): Promise<void> {
    const next = this.#store.earliestLeaseEnd();
    if (next === null) {
      await this.ctx.storage.deleteAlarm();
      return;
    }
    // An alarm set for "now" from inside alarm() is dropped locally: always at least 1 ms ahead.
    await this.ctx.storage.setAlarm(Math.max(next, Date.now() + 1));
  }

  /** Authorizes access to a ticket by the enrollment token that holds it or by one of its admission tokens. */
  async #ticketAccess(bearer: string, ticketId: string, kinds: Principal["kind"][]): Promise<{ ok: true; value: Principal } | Failure> {
    if (!this.#store.cluster()) return fail(401, "unauthorized", "unknown token");
    const principal = await this.#credentials.authenticate(bearer, Date.now());
    if (!principal.ok) return principal;
    const p = principal.value;
    if (!kinds.includes(p.kind)) return fail(403, "wrong_token_kind", `this call takes ${kinds.map((k) => `an ${k} token`).join(" or ")}`);
    const row = this.#store.ticket(ticketId);
    if (!row) return fail(404, "ticket_not_found", `no ticket ${ticketId}`);
    const allowed = p.kind === "enrollment" ? row.enrollment_token_id === p.id : p.ticket === row.id;
    if (!allowed) return fail(403, "forbidden", `this token does not grant access to ticket ${ticketId}`);
    return principal;
  }

  /** The ticket and its admission, when the bearer is the ticket's current, active admission token. */
  async #currentAdmission(bearer: string, ticketId: string): Promise<{ ok: true; value: { row: TicketRow; admission: AdmissionRow } } | Failure> {
    const access = await this.#ticketAccess(bearer, ticketId, ["admission"]);
    if (!access.ok) return access;
    await this.#settle();
    const row = this.#store.ticket(ticketId)!;
    const jti = (access.value as { jti: string }).jti;
    const admission = this.#store.admission(jti);
    if (row.state === "queued") return fail(409, "not_admitted", `ticket ${ticketId} is queued, not admitted`);
    if (row.state !== "admitted" || row.jti !== jti || admission?.status !== "active") {
      const why = admission && admission.status !== "active" ? `${admission.status}${admission.reason ? ` (${admission.reason})` : ""}` : `ticket is ${row.state}`;
      return fail(410, "admission_inactive", `admission ${jti} is no longer active: ${why}`);
    }
    return { ok: true, value: { row, admission } };
  }
}
