/**
 * The JoinQueue's state changes as synchronous commands over its store.
 *
 * A command reads, checks and writes everything it decides on inside one `transactionSync`,
 * with no await in between, so no other request can change what it read. Whatever must await
 * (authenticating a bearer, signing a token, generating a key) happens before the command; the
 * command then re-checks what that work relied on (the ticket's state, version and `jti`, the
 * enrollment token's validity, the current signing key) and fails closed, or asks its caller to
 * retry, when it changed. Every compare-and-set result is acted on: a write that cannot miss
 * inside the transaction and still does is an invariant violation, which rolls the whole
 * command back and surfaces as a 500.
 *
 * Commands also collect what their caller must do once they committed: wake the long polls of
 * the tickets they changed, re-arm the alarm when a lease changed.
 * @module
 */
import {
  admissibleUnderStartRule,
  admittableRole,
  awaitsAdmin,
  decideTicketRequest,
  freeSlots,
  leaseEnd,
  needsBootstrap,
  retentionCutoffs,
  startRuleAdmits,
  transition,
  validatePolicy,
  type QueuePolicy,
  type RetentionPolicy,
  type Role,
  type TicketEvent,
} from "./policy.ts";
import type { Principal } from "./credentials.ts";
import { actionLevel, isLogged, type LogLevel } from "./event-log.ts";
import { type QueueStore, clusterFacts, clusterPolicy, startFacts, type MemberRow, type TicketRow } from "./store.ts";
import { fail, iso, type Failure } from "./views.ts";
import { randomId } from "../tokens/secrets.ts";

/** A node that would bootstrap a restored cluster asks again this much later (an admin must decide first). */
export const RESTORED_RETRY_AFTER_SECONDS = 30;
const RESTORED_DETAIL = (cluster: string) =>
  `the broker's state of ${cluster} was restored from an earlier point and says the cluster was never bootstrapped, which may no longer be true: ` +
  `no bootstrap until an admin decides (adopt, if the cluster exists; bootstrap allow, if it never formed)`;

/** A write that cannot fail inside its transaction failed: the command is rolled back (500). */
export class InvariantViolation extends Error {
  override readonly name = "InvariantViolation";
  readonly code = "invariant_violation";
}

function must(applied: boolean, what: string): void {
  if (!applied) throw new InvariantViolation(`${what} did not apply inside its transaction`);
}

export interface Effects {
  /** Tickets whose view changed: their long polls are woken. */
  tickets: Set<string>;
  /** A lease started, moved or ended: the alarm is re-armed. */
  leases: boolean;
  /** Audit rows were written: audit followers are woken. */
  audit: boolean;
}

export interface CommandHost {
  logLevel(): LogLevel;
  /** False in tests of the alarm: then only `alarm()` ends leases. */
  settleLazily(): boolean;
  clusterName(): string;
  retention(): RetentionPolicy;
}

type Ok<T> = { ok: true; value: T };
const ok = <T>(value: T): Ok<T> => ({ ok: true, value });

export type TicketRequestResult =
  | Ok<{ kind: "ticket"; id: string; created: boolean; row: TicketRow | null }>
  | Ok<{ kind: "adopted_member"; member: MemberRow }>
  | Failure;

export interface SignedAdmission {
  ticket: TicketRow;
  claims: { jti: string; iat: number; exp: number };
  token: string;
}

export class QueueCommands {
  #pendingLogs: { level: "debug" | "info"; entry: Record<string, unknown> }[] = [];
  #effects: Effects = { tickets: new Set(), leases: false, audit: false };

  constructor(
    readonly store: QueueStore,
    private readonly storage: DurableObjectStorage,
    private readonly host: CommandHost,
  ) {}

  // ---------------------------------------------------------------- running

  /** Runs `fn` as one transaction; its log lines and effects count only once it committed. */
  run<T>(fn: () => T): T {
    const before = this.#effects;
    this.#effects = { tickets: new Set(before.tickets), leases: before.leases, audit: before.audit };
    this.#pendingLogs = [];
    let result: T;
    try {
      result = this.storage.transactionSync(fn);
    } catch (e) {
      this.#pendingLogs = [];
      this.#effects = before;
      this.store.forgetCached();
      throw e;
    }
    const cluster = this.store.cluster()?.name ?? this.host.clusterName();
    for (const { level, entry } of this.#pendingLogs) {
      const line = JSON.stringify({ cluster, ...entry });
      if (level === "debug") console.debug(line);
      else console.log(line);
    }
    this.#pendingLogs = [];
    return result;
  }

  /** What the committed commands left to do; resets the list. */
  takeEffects(): Effects {
    const e = this.#effects;
    this.#effects = { tickets: new Set(), leases: false, audit: false };
    return e;
  }

  /** An audit row, and (after commit, at its level) the matching structured log line. */
  record(at: number, actor: string, action: string, subject: string, detail: Record<string, unknown> = {}): void {
    this.store.audit(at, actor, action, subject, detail);
    this.#effects.audit = true;
    this.#log(at, actor, action, subject, detail);
  }

  #log(at: number, actor: string, action: string, subject: string, detail: Record<string, unknown>): void {
    const level = actionLevel(action);
    if (isLogged(level, this.host.logLevel()))
      this.#pendingLogs.push({ level, entry: { event: action, time: new Date(at).toISOString(), actor, subject, ...detail } });
  }

  /** Moves a ticket by a lifecycle event (policy.ts), compare-and-set on the state and version it was read with. */
  #move(row: TicketRow, event: TicketEvent, fields: Partial<Omit<TicketRow, "id" | "seq" | "version" | "state">>): void {
    const to = transition(row.state, event);
    if (to === null) throw new InvariantViolation(`ticket ${row.id} cannot ${event} from ${row.state}`);
    must(this.store.updateTicket(row.id, row.state, { ...fields, state: to }, row.version), `ticket ${row.id} ${event}`);
    this.#effects.tickets.add(row.id);
    if (row.state === "admitted" || to === "admitted") this.#effects.leases = true;
  }

  // ---------------------------------------------------------------- time

  /** Ends the leases that are due at `now`. Runs inside the caller's transaction. */
  #expireLeases(now: number): void {
    const earliest = this.store.earliestLeaseEnd();
    if (earliest === null || earliest > now) return;
    for (const t of this.store.dueLeases(now)) {
      this.#move(t, "expire", { ended_at: now, end_reason: "lease expired", lease_expires_at: null });
      if (t.jti) must(this.store.endAdmission(t.jti, "expired", "lease expired", now), `admission ${t.jti} expiry`);
      this.record(now, "system", "lease.expired", t.id, { node: t.node, jti: t.jti, role: t.role });
    }
  }

  /** Lazy settling at the start of every command: a late alarm never keeps an expired admission active. */
  #settleLazily(now: number): void {
    if (this.host.settleLazily()) this.#expireLeases(now);
  }

  /** What time has made due, as a command of its own (reads, and the alarm with `force`). */
  settle(now: number, force = false): void {
    if (!force && !this.host.settleLazily()) return;
    const earliest = this.store.earliestLeaseEnd();
    if (earliest === null || earliest > now) return;
    this.run(() => this.#expireLeases(now));
  }

  /** Deletes history past its retention window (the alarm's sweep). */
  sweep(now: number): Record<string, number> {
    return this.run(() => {
      const deleted = this.store.deleteHistory(retentionCutoffs(now, this.host.retention()));
      this.store.updateCluster({ swept_at: now });
      return deleted;
    });
  }

  // ---------------------------------------------------------------- access

  /**
   * Whether `principal` may act on ticket `ticketId` now. An enrollment token must still be valid
   * and be the one that holds the ticket; an admission token must be for this ticket and be its
   * current, active admission (else 410 with the reason: revoked, expired, completed, abandoned,
   * superseded, unknown).
   */
  access(now: number, principal: Principal, ticketId: string, kinds: readonly Principal["kind"][]): Ok<TicketRow> | Failure {
    if (!kinds.includes(principal.kind)) return fail(403, "wrong_token_kind", `this call takes ${kinds.map((k) => `an ${k} token`).join(" or ")}`);
    const row = this.store.ticket(ticketId);
    if (!row) return fail(404, "ticket_not_found", `no ticket ${ticketId}`);
    if (principal.kind === "enrollment") {
      if (!this.store.enrollmentValid(principal.id, now)) return fail(401, "unauthorized", "the enrollment token is revoked or expired");
      if (row.enrollment_token_id !== principal.id) return fail(403, "forbidden", `this token does not grant access to ticket ${ticketId}`);
      return ok(row);
    }
    if (principal.ticket !== row.id) return fail(403, "forbidden", `this token does not grant access to ticket ${ticketId}`);
    const inactive = this.admissionInactive(now, principal.jti, principal.exp, row);
    if (inactive)
      return fail(410, "admission_inactive", `admission ${principal.jti} is no longer active: ${inactive.detail}`, undefined, { reason: inactive.reason });
    return ok(row);
  }

  /** Null when `jti` is the ticket's current, active, unexpired admission; else why not. */
  admissionInactive(now: number, jti: string, expSeconds: number, row: TicketRow | null): { reason: string; detail: string } | null {
    const a = this.store.admission(jti);
    if (!a) return { reason: "unknown", detail: "unknown admission" };
    if (a.status !== "active") return { reason: a.status, detail: `${a.status}${a.reason ? ` (${a.reason})` : ""}` };
    if (row?.state !== "admitted" || row.jti !== jti) return { reason: "superseded", detail: `ticket ${a.ticket_id} has another admission` };
    if (expSeconds * 1000 <= now) return { reason: "expired", detail: "the admission token has expired" };
    return null;
  }

  // ---------------------------------------------------------------- node-facing

  requestTicket(now: number, enrollmentId: string, node: string, peerURL: string, exclusiveUntilStarted = false): TicketRequestResult {
    return this.run((): TicketRequestResult => {
      this.#settleLazily(now);
      if (!this.store.enrollmentValid(enrollmentId, now)) return fail(401, "unauthorized", "the enrollment token is revoked or expired");
      const c = this.store.cluster()!;
      const { live, member } = this.store.nodeStanding(node);
      // Before anything about the ticket is disclosed (its peer URL in a conflict, say).
      const held = live && this.#heldByAnother(now, live, enrollmentId);
      if (held) return held;
      const decision = decideTicketRequest({
        cluster: clusterFacts(c),
        node,
        peerURL,
        live: live && { peerURL: live.peer_url },
        member: member && { peerURL: member.peer_url },
        queuedCount: this.store.liveCount("queued"),
        policy: clusterPolicy(c),
      });
      switch (decision.kind) {
        case "existing": {
          // A node asking for the start rule gets it on its live ticket too (only ever tightened).
          if (exclusiveUntilStarted && live!.exclusive_until_started === 0) {
            must(this.store.updateTicket(live!.id, live!.state, { exclusive_until_started: 1 }, live!.version), `ticket ${live!.id} start rule`);
            this.record(now, `node:${node}`, "ticket.exclusive_until_started", live!.id, { node });
            this.#effects.tickets.add(live!.id);
            return ok({ kind: "ticket" as const, id: live!.id, created: false, row: null });
          }
          if (live!.enrollment_token_id === enrollmentId) return ok({ kind: "ticket" as const, id: live!.id, created: false, row: live });
          // Its token was revoked or expired (#heldByAnother): the node takes its ticket back.
          must(this.store.setTicketEnrollment(live!.id, enrollmentId), `ticket ${live!.id} enrollment`);
          this.record(now, `node:${node}`, "ticket.reclaimed", live!.id, { node, enrollmentToken: enrollmentId, previousToken: live!.enrollment_token_id });
          return ok({ kind: "ticket" as const, id: live!.id, created: false, row: null });
        }
        case "already_joined": {
          const last = this.store.latestTicketOf(node);
          // Adopted members (and members whose ticket retention deleted) have no ticket to show.
          if (last?.state !== "joined") return ok({ kind: "adopted_member" as const, member: member! });
          return ok({ kind: "ticket" as const, id: last.id, created: false, row: last });
        }
        case "peer_url_conflict": {
          const held = decision.heldBy === "ticket" ? live!.peer_url : member!.peer_url;
          return fail(
            409,
            "peer_url_conflict",
            `node ${node} already holds ${decision.heldBy === "ticket" ? "a live ticket" : "membership"} with peerURL ${held}`,
          );
        }
        case "queue_full":
          return fail(503, "queue_full", `the join queue of ${c.name} is full (maxQueue ${c.max_queue})`, 30);
        case "restored_awaiting_admin":
          return fail(503, "restored_awaiting_admin", RESTORED_DETAIL(c.name), RESTORED_RETRY_AFTER_SECONDS);
        case "revive_bootstrap":
        case "new": {
          const latest = decision.kind === "revive_bootstrap" ? this.store.latestTicketOf(node) : null;
          const previous = latest?.role === "bootstrap" ? latest : null;
          if (previous && previous.peer_url !== peerURL) {
            return fail(409, "peer_url_conflict", `node ${node} holds the bootstrap ticket with peerURL ${previous.peer_url}`);
          }
          if (previous) {
            // The bootstrap ticket coming back to its node is not a new use of the enrollment token.
            // Its old admission stays ended: that token is refused on this ticket (410 superseded).
            this.#move(previous, "revive", {
              enrollment_token_id: enrollmentId,
              ended_at: null,
              end_reason: null,
              jti: null,
              lease_expires_at: null,
              member_started_at: null,
              exclusive_until_started: exclusiveUntilStarted ? 1 : 0,
            });
            this.record(now, `node:${node}`, "ticket.bootstrap_returned", previous.id, { node, previousState: previous.state });
            return ok({ kind: "ticket" as const, id: previous.id, created: true, row: null });
          }
          if (!this.store.enrollmentUseLeft(enrollmentId)) return fail(403, "enrollment_token_exhausted", "the enrollment token has reached its use limit");
          const role: Role = decision.kind === "new" ? decision.role : "bootstrap";
          const id = randomId("tkt_");
          const row = this.store.insertTicket({
            id,
            seq: this.store.nextSeq(),
            node,
            peer_url: peerURL,
            role,
            enrollment_token_id: enrollmentId,
            created_at: now,
            exclusive_until_started: exclusiveUntilStarted ? 1 : 0,
          });
          if (role === "bootstrap") this.store.updateCluster({ bootstrap_node: node });
          this.record(now, `node:${node}`, "ticket.created", id, {
            node,
            peerURL,
            role,
            enrollmentToken: enrollmentId,
            ...(exclusiveUntilStarted ? { exclusiveUntilStarted } : {}),
          });
          this.#effects.tickets.add(id);
          return ok({ kind: "ticket" as const, id, created: true, row });
        }
      }
    });
  }

  /**
   * A live ticket belongs to the enrollment token that holds it: another token is refused with
   * 409 `ticket_held` (audited) while the holder is still valid. Once the holder is revoked or
   * expired the node may take its ticket back with a new token (the "existing" decision).
   */
  #heldByAnother(now: number, live: TicketRow, enrollmentId: string): Failure | null {
    const holder = live.enrollment_token_id;
    if (holder === enrollmentId || holder === null || !this.store.enrollmentValid(holder, now)) return null;
    this.record(now, `node:${live.node}`, "ticket.held", live.id, { node: live.node, enrollmentToken: enrollmentId, heldBy: holder });
    return fail(
      409,
      "ticket_held",
      `node ${live.node} already has a live ticket, held by another enrollment token that is still valid; ask with that token, or revoke it first`,
    );
  }

  /** A read that answers only a ticket the bearer may still see (enrollment owner, or its current admission). */
  readTicket(now: number, principal: Principal, ticketId: string): Ok<TicketRow> | Failure {
    this.settle(now);
    return this.access(now, principal, ticketId, ["enrollment", "admission"]);
  }

  heartbeat(now: number, principal: Principal, ticketId: string): Ok<TicketRow> | Failure {
    return this.run(() => {
      this.#settleLazily(now);
      const access = this.access(now, principal, ticketId, ["admission"]);
      if (!access.ok) return access;
      const row = access.value;
      const admission = this.store.admission(row.jti!)!;
      const lease = leaseEnd(now, clusterPolicy(this.store.cluster()!), admission.expires_at);
      must(this.store.updateTicket(row.id, "admitted", { lease_expires_at: lease }, row.version), `ticket ${row.id} lease extension`);
      this.#effects.tickets.add(row.id);
      this.#effects.leases = true;
      // A log line (debug), not an audit row: one row per heartbeat would be most of the history.
      this.#log(now, `node:${row.node}`, "lease.extended", row.id, { jti: row.jti, leaseExpiresAt: iso(lease) });
      return ok({ ...row, lease_expires_at: lease, version: row.version + 1 });
    });
  }

  /**
   * The node's etcd member started (its etcd runs as a member of the cluster): under the start rule
   * the next node may now be admitted beside it. Recorded once; a repeat is answered as it is.
   */
  memberStarted(now: number, principal: Principal, ticketId: string, memberID: string): Ok<TicketRow> | Failure {
    return this.run((): Ok<TicketRow> | Failure => {
      this.#settleLazily(now);
      const access = this.access(now, principal, ticketId, ["admission"]);
      if (!access.ok) return access;
      const row = access.value;
      if (row.member_started_at !== null) {
        if (row.member_id !== memberID) return fail(409, "member_id_conflict", `ticket ${row.id} reported member ${row.member_id} started`);
        return ok(row);
      }
      must(this.store.updateTicket(row.id, "admitted", { member_started_at: now, member_id: memberID }, row.version), `ticket ${row.id} member started`);
      this.#effects.tickets.add(row.id);
      this.record(now, `node:${row.node}`, "ticket.member_started", row.id, { node: row.node, memberID, jti: row.jti });
      return ok(this.store.ticket(row.id)!);
    });
  }

  /**
   * The node gives up its admission leaving member `memberID` in etcd, which it could not remove
   * (etcd without quorum, say): the next node must not be admitted into a cluster that cannot
   * take it. The ticket is abandoned, and the cluster paused and marked as needing an operator,
   * in one step; an admin's resume (after removing the member) clears both.
   */
  memberStuck(now: number, principal: Principal, ticketId: string, memberID: string, detail: string): Ok<TicketRow> | Failure {
    return this.run((): Ok<TicketRow> | Failure => {
      this.#settleLazily(now);
      const access = this.access(now, principal, ticketId, ["admission"]);
      if (!access.ok) return access;
      const row = access.value;
      const c = this.store.cluster()!;
      this.#move(row, "abandon", { ended_at: now, end_reason: `abandoned by the node: member ${memberID} left in etcd`, lease_expires_at: null });
      must(this.store.endAdmission(row.jti!, "abandoned", "abandoned by the node: member left in etcd", now), `admission ${row.jti} abandon`);
      const needs = { node: row.node, ticket: row.id, memberID, detail, at: now };
      this.store.updateCluster({ paused: 1, needs_operator: JSON.stringify(needs) });
      this.record(now, `node:${row.node}`, "ticket.abandoned", row.id, { node: row.node, previousState: row.state, jti: row.jti, memberID });
      this.record(now, `node:${row.node}`, "cluster.needs_operator", c.name, { node: row.node, ticket: row.id, memberID, detail, wasPaused: c.paused === 1 });
      return ok(this.store.ticket(row.id)!);
    });
  }

  complete(now: number, principal: Principal, ticketId: string, memberID: string): Ok<TicketRow> | Failure {
    return this.run((): Ok<TicketRow> | Failure => {
      this.#settleLazily(now);
      const ticket = this.store.ticket(ticketId);
      if (ticket?.state === "joined" && principal.kind === "admission" && principal.ticket === ticket.id && principal.jti === ticket.jti) {
        // A retried complete by the admission that completed it (the agent crashed before it saw the answer).
        if (ticket.member_id !== memberID) return fail(409, "member_id_conflict", `ticket ${ticket.id} completed with member ${ticket.member_id}`);
        return ok(ticket);
      }
      const access = this.access(now, principal, ticketId, ["admission"]);
      if (!access.ok) return access;
      const row = access.value;
      const c = this.store.cluster()!;
      this.#move(row, "complete", { member_id: memberID, ended_at: now, lease_expires_at: null });
      must(this.store.endAdmission(row.jti!, "completed", "member joined", now), `admission ${row.jti} completion`);
      this.store.upsertMember({
        node: row.node,
        peer_url: row.peer_url,
        member_id: memberID,
        source: row.role === "bootstrap" ? "bootstrap" : "join",
        joined_at: now,
      });
      const took = now - (row.admitted_at ?? now);
      const typical = c.typical_admission_ms === 0 ? took : Math.round(c.typical_admission_ms * 0.7 + took * 0.3);
      // A bootstrap completed: the cluster exists, whatever a restore left unknown.
      this.store.updateCluster(
        row.role === "bootstrap" ? { bootstrapped: 1, restored_at: null, typical_admission_ms: typical } : { typical_admission_ms: typical },
      );
      this.record(now, `node:${row.node}`, "ticket.joined", row.id, { node: row.node, memberID, role: row.role, jti: row.jti });
      if (row.role === "bootstrap") this.record(now, `node:${row.node}`, "cluster.bootstrapped", c.name, { node: row.node, memberID });
      return ok(this.store.ticket(row.id)!);
    });
  }

  abandon(now: number, principal: Principal, ticketId: string): Ok<TicketRow> | Failure {
    return this.run((): Ok<TicketRow> | Failure => {
      this.#settleLazily(now);
      const access = this.access(now, principal, ticketId, ["enrollment", "admission"]);
      if (!access.ok) return access;
      const row = access.value;
      if (row.state !== "queued" && row.state !== "admitted") return ok(row);
      this.#move(row, "abandon", { ended_at: now, end_reason: "abandoned by the node", lease_expires_at: null });
      if (row.state === "admitted" && row.jti)
        must(this.store.endAdmission(row.jti, "abandoned", "abandoned by the node", now), `admission ${row.jti} abandon`);
      this.record(now, `node:${row.node}`, "ticket.abandoned", row.id, { node: row.node, previousState: row.state, jti: row.jti });
      return ok(this.store.ticket(row.id)!);
    });
  }

  // ---------------------------------------------------------------- admission

  /** The queued tickets the free slots would take now, or null when nothing can be admitted. */
  planAdmissions(): { tickets: TicketRow[] } | null {
    const open = this.#openSlots();
    if (!open) return null;
    const queued = this.store.queuedOfRole(open.role, open.slots);
    const tickets = queued.slice(0, admissibleUnderStartRule(this.store.admittedTickets().map(startFacts), queued.map(startFacts)));
    return tickets.length ? { tickets } : null;
  }

  /** Whether anyone is queued for a free slot (cheap: one read of the counts the triggers keep). */
  hasOpenSlots(): boolean {
    return this.#openSlots() !== null;
  }

  #openSlots(): { role: Role; slots: number } | null {
    const c = this.store.cluster();
    if (!c) return null;
    const live = this.store.liveCounts();
    if (live.queued === 0) return null;
    const facts = clusterFacts(c);
    const role = admittableRole(facts);
    const slots = freeSlots(live.admitted, clusterPolicy(c), facts);
    return role === null || slots === 0 ? null : { role, slots };
  }

  /**
   * Admits tickets whose tokens were signed with key `kid` while the command was not running.
   * "key_changed" when the key was rotated meanwhile: the caller signs again with the new key, so
   * that no token is issued under a key that rotation already retired. A ticket that changed
   * since it was planned (abandoned, revoked, handed the bootstrap role) is skipped.
   */
  admit(now: number, kid: string, signed: SignedAdmission[]): string[] | "key_changed" {
    return this.run(() => {
      if (this.store.currentKey()?.kid !== kid) return "key_changed" as const;
      this.#settleLazily(now);
      const done: string[] = [];
      for (const { ticket: t, claims, token } of signed) {
        const c = this.store.cluster()!;
        const facts = clusterFacts(c);
        if (admittableRole(facts) !== t.role || freeSlots(this.store.liveCount("admitted"), clusterPolicy(c), facts) === 0) break;
        if (!startRuleAdmits(this.store.admittedTickets().map(startFacts), startFacts(t))) break;
        const lease = leaseEnd(now, clusterPolicy(c), claims.exp);
        if (!this.store.updateTicket(t.id, "queued", { state: "admitted", admitted_at: now, lease_expires_at: lease, jti: claims.jti }, t.version)) continue;
        this.store.insertAdmission({ jti: claims.jti, ticket_id: t.id, node: t.node, kid, token, issued_at: claims.iat, expires_at: claims.exp });
        this.record(now, "system", "ticket.admitted", t.id, { node: t.node, role: t.role, jti: claims.jti, exp: claims.exp, leaseExpiresAt: iso(lease) });
        this.#effects.tickets.add(t.id);
        this.#effects.leases = true;
        done.push(t.id);
      }
      return done;
    });
  }

  // ---------------------------------------------------------------- admin

  revokeAdmission(now: number, jti: string, reason: string): Ok<{ changed: boolean }> | Failure {
    return this.run((): Ok<{ changed: boolean }> | Failure => {
      this.#settleLazily(now);
      const admission = this.store.admission(jti);
      if (!admission) return fail(404, "admission_not_found", `no admission token with jti ${jti}`);
      if (!this.store.endAdmission(jti, "revoked", reason, now)) return ok({ changed: false });
      const ticket = this.store.ticket(admission.ticket_id);
      if (ticket?.state === "admitted" && ticket.jti === jti) {
        this.#move(ticket, "revoke", { ended_at: now, end_reason: `revoked: ${reason}`, lease_expires_at: null });
      }
      this.#effects.tickets.add(admission.ticket_id);
      this.record(now, "admin", "admission.revoked", jti, { ticket: admission.ticket_id, node: admission.node, reason });
      return ok({ changed: true });
    });
  }

  /**
   * Makes `fresh` the signing key. The retired key stays published until the last token it
   * signed expires; no token can be signed with it afterwards (`admit` re-checks the key).
   */
  rotateKey(now: number, fresh: { kid: string; privateJwk: string; publicJwk: string }): string | null {
    return this.run(() => {
      const old = this.store.currentKey();
      if (old) {
        const lastExp = this.store.latestAdmissionExpiry(old.kid);
        this.store.retireKey(old.kid, now, Math.max(now, (lastExp ?? 0) * 1000));
      }
      this.store.insertKey({
        kid: fresh.kid,
        private_jwk: fresh.privateJwk,
        public_jwk: fresh.publicJwk,
        created_at: Math.max(now, (old?.created_at ?? 0) + 1),
      });
      this.record(now, "admin", "keys.rotated", fresh.kid, { retired: old?.kid ?? null });
      return old?.kid ?? null;
    });
  }

  /** Pauses or resumes admissions; resuming also clears a need for an operator (the admin dealt with it). */
  setPaused(now: number, cluster: string, paused: boolean): void {
    this.run(() => {
      const needs = this.store.cluster()?.needs_operator ?? null;
      this.store.updateCluster(paused ? { paused: 1 } : { paused: 0, needs_operator: null });
      this.record(
        now,
        "admin",
        paused ? "cluster.paused" : "cluster.resumed",
        cluster,
        !paused && needs ? { needsOperatorCleared: JSON.parse(needs) as unknown } : {},
      );
    });
  }

  setPolicy(now: number, cluster: string, patch: Partial<QueuePolicy>): Ok<QueuePolicy> | Failure {
    return this.run((): Ok<QueuePolicy> | Failure => {
      const c = this.store.cluster()!;
      const next = { ...clusterPolicy(c), ...patch };
      const problem = validatePolicy(next);
      if (problem) return fail(400, "invalid_request", problem);
      this.store.updateCluster({
        max_in_flight: next.maxInFlight,
        lease_seconds: next.leaseSeconds,
        admission_ttl_seconds: next.admissionTtlSeconds,
        max_queue: next.maxQueue,
      });
      this.record(now, "admin", "policy.changed", cluster, { from: clusterPolicy(c), to: next });
      return ok(next);
    });
  }

  adopt(now: number, cluster: string, members: { node: string; peerURL: string }[]): Ok<null> | Failure {
    return this.run((): Ok<null> | Failure => {
      this.#settleLazily(now);
      const c = this.store.cluster()!;
      const restored = awaitsAdmin(clusterFacts(c));
      // A bootstrap ticket that ended (its node abandoned it: it found a cluster already there,
      // say) no longer stands in the way; its node, asking again, is then told to join. After a
      // restore a live one does not either: it ends below.
      const holder = !c.bootstrapped && c.bootstrap_node !== null ? this.store.liveTicketOf(c.bootstrap_node) : null;
      if (holder?.role === "bootstrap" && !restored) {
        return fail(
          409,
          "bootstrap_in_progress",
          `node ${c.bootstrap_node} holds this cluster's bootstrap ticket; adopt an existing cluster before any node asks for a ticket, or once that ticket has ended (abandoned)`,
        );
      }
      // After a restore the admin says the cluster exists: a bootstrap ticket the restored state
      // still holds ends, so that its node asks again and joins (or is an adopted member).
      const held = restored && c.bootstrap_node ? this.store.liveTicketOf(c.bootstrap_node) : null;
      const bootstrap = held?.role === "bootstrap" ? held : null;
      // Checked before anything is written: a refusal must change nothing.
      const conflict = members.find((m) => m.node !== bootstrap?.node && this.store.liveTicketOf(m.node));
      if (conflict) return fail(409, "node_has_live_ticket", `node ${conflict.node} has a live ticket; abandon it before adopting the node`);
      if (bootstrap) this.#endBootstrapTicket(now, bootstrap, "the cluster exists: adopted after a restore");
      this.store.updateCluster({ adopted: 1, restored_at: null });
      for (const m of members) this.store.upsertMember({ node: m.node, peer_url: m.peerURL, member_id: null, source: "adopt", joined_at: now });
      this.record(now, "admin", "cluster.adopted", cluster, { members });
      return ok(null);
    });
  }

  forgetMember(now: number, node: string): Ok<null> | Failure {
    return this.run((): Ok<null> | Failure => {
      const member = this.store.member(node);
      if (!member) return fail(404, "member_not_found", `node ${node} is not a member of this cluster`);
      must(this.store.deleteMember(node), `member ${node} deletion`);
      this.record(now, "admin", "member.forgotten", node, { peerURL: member.peer_url, memberID: member.member_id });
      return ok(null);
    });
  }

  /** Ends a live bootstrap ticket (and its admission): a reassignment, or an adoption after a restore. */
  #endBootstrapTicket(now: number, old: TicketRow, why: string): string | null {
    let revoked: string | null = null;
    if (old.state === "admitted" && old.jti) {
      must(this.store.endAdmission(old.jti, "revoked", why, now), `admission ${old.jti} revocation`);
      revoked = old.jti;
    }
    this.#move(old, "reassign", { ended_at: now, end_reason: why, lease_expires_at: null });
    return revoked;
  }

  /**
   * The cluster's state came back from an earlier point (a restored backup, a point-in-time
   * restore): if it looks never bootstrapped, it may exist all the same, so no bootstrap is
   * granted or admitted until an admin decides (`adopt`, or `allowBootstrap`), and an admitted
   * bootstrap ticket ends. `restoreId` names a self-hosted restore: each is taken note of once.
   * Returns whether bootstrap now waits.
   */
  markRestored(now: number, actor: "admin" | "system", reason: string, restoreId: string | null = null): boolean {
    return this.run(() => {
      const c = this.store.cluster();
      if (!c || (restoreId !== null && c.restore_id === restoreId)) return c ? awaitsAdmin(clusterFacts(c)) : false;
      this.#settleLazily(now);
      const waits = needsBootstrap(clusterFacts(c));
      this.store.updateCluster({ ...(waits ? { restored_at: now } : {}), ...(restoreId !== null ? { restore_id: restoreId } : {}) });
      // An admission to bootstrap that the restored state still calls active may be one the
      // cluster outgrew: it ends too (fail closed), and its node asks again like any other.
      const held = waits && c.bootstrap_node ? this.store.liveTicketOf(c.bootstrap_node) : null;
      const revoked =
        held?.role === "bootstrap" && held.state === "admitted"
          ? this.#endBootstrapTicket(now, held, "state restored: an admin decides before any bootstrap")
          : null;
      this.record(now, actor, "cluster.restored", c.name, { reason, restoreId, awaitingAdmin: waits, revoked });
      return waits;
    });
  }

  /** The admin's decision after a restore that the cluster never formed: its bootstrap may go ahead. */
  allowBootstrap(now: number, reason: string): Ok<{ changed: boolean }> | Failure {
    return this.run((): Ok<{ changed: boolean }> | Failure => {
      const c = this.store.cluster()!;
      if (!needsBootstrap(clusterFacts(c)))
        return fail(409, "already_bootstrapped", "the cluster is already bootstrapped or adopted: there is no bootstrap to allow");
      if (c.restored_at === null) return ok({ changed: false });
      this.store.updateCluster({ restored_at: null });
      this.record(now, "admin", "bootstrap.allowed", c.name, { reason, restoredAt: iso(c.restored_at) });
      if (c.bootstrap_node) {
        const held = this.store.liveTicketOf(c.bootstrap_node);
        if (held) this.#effects.tickets.add(held.id);
      }
      return ok({ changed: true });
    });
  }

  reassignBootstrap(now: number, node: string, reason: string): Ok<{ revoked: string | null }> | Failure {
    return this.run((): Ok<{ revoked: string | null }> | Failure => {
      this.#settleLazily(now);
      const c = this.store.cluster()!;
      if (!needsBootstrap(clusterFacts(c)))
        return fail(409, "already_bootstrapped", "the cluster is already bootstrapped or adopted: there is no bootstrap ticket to hand over");
      let revoked: string | null = null;
      const old = c.bootstrap_node ? this.store.liveTicketOf(c.bootstrap_node) : null;
      if (old && old.role === "bootstrap" && old.node !== node) revoked = this.#endBootstrapTicket(now, old, `bootstrap reassigned: ${reason}`);
      const target = this.store.liveTicketOf(node);
      if (target && target.role !== "bootstrap") {
        must(this.store.updateTicket(target.id, target.state, { role: "bootstrap" }, target.version), `ticket ${target.id} role`);
        this.#effects.tickets.add(target.id);
      }
      this.store.updateCluster({ bootstrap_node: node });
      this.record(now, "admin", "bootstrap.reassigned", node, { from: c.bootstrap_node, reason, revoked });
      return ok({ revoked });
    });
  }
}
