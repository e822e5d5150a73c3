/**
 * JoinQueue: one Durable Object per cluster, the single writer of that cluster's join queue.
 *
 * A thin facade of RPC methods over synchronous commands (commands.ts): each method first does
 * what must await (authenticating the bearer, signing admission tokens, generating a key), then
 * runs one command that reads, checks and writes in one `transactionSync` and re-checks what the
 * awaited work relied on. The rules are pure functions in policy.ts, the SQL in store.ts.
 * Lease expiry runs on one alarm armed at the earliest lease end (or the next retention sweep);
 * it is also applied lazily at the start of every command, so a late alarm never keeps an
 * expired admission active. Long polls wait here, in memory, and are woken by the change.
 * Time comes from `clock` (clock.ts), which tests move instead of sleeping.
 *
 * RPC methods return an `Outcome` union for every expected result instead of throwing; anything
 * thrown is a bug or a runtime failure, and the Worker answers it 500 (or 503 when the runtime
 * says it is transient).
 * @module
 */
import { DurableObject } from "cloudflare:workers";
import type { JWK, JWTPayload } from "jose";
import {
  DEFAULT_POLICY,
  DEFAULT_RETENTION,
  awaitsAdmin,
  estimatedWaitSeconds,
  needsBootstrap,
  retryAfterSeconds,
  type QueuePolicy,
  type RetentionPolicy,
  type TicketState,
} from "./policy.ts";
import { Clock } from "./clock.ts";
import { QueueCommands, type SignedAdmission } from "./commands.ts";
import { Credentials, type Principal } from "./credentials.ts";
import { actionLevel, isLogged, parseLogLevel, type LogLevel } from "./event-log.ts";
import { WAIT_BUCKETS_SECONDS, renderMetrics } from "./metrics.ts";
import { hasSchema, migrate, SCHEMA_VERSION } from "./schema.ts";
import { Waiters } from "./waiters.ts";
import { AdminCredentials, adminCredentialView, type AdminCredentialView } from "./admin-credentials.ts";
import { CLUSTER_INDEX_NAME, ClusterIndex, INDEXED_KEY, type IndexedCluster } from "./cluster-index.ts";
import { QueueStore, clusterFacts, clusterPolicy, type ClusterRow, type TicketRow } from "./store.ts";
import {
  adminTicketView,
  auditView,
  enrollmentTokenView,
  fail,
  iso,
  memberView,
  needsOperatorView,
  ticketEtag,
  ticketView,
  type Failure,
  type Outcome,
  type QueuedExtras,
  type TicketView,
} from "./views.ts";
import { scopeProblem } from "../../shared/protocol/token-scope.ts";
import { admissionClaims } from "../../shared/protocol/claims.ts";
import { generateSigningKey, signAdmission } from "../tokens/keys.ts";
import { newEnrollmentToken, randomId, sha256Hex } from "../tokens/secrets.ts";

export type IntrospectResult =
  | { active: true; claims: JWTPayload; leaseExpiresAt?: string }
  | { active: false; reason: "revoked" | "expired" | "completed" | "abandoned" | "invalid" | "unknown_cluster" | "superseded" | "unknown" };

export interface EnrollmentTokenInput {
  ttlSeconds?: number;
  maxUses?: number;
  description?: string;
  nodes?: string[];
  peerHosts?: string[];
}

const LONG_POLL_MAX_MS = 30_000;
/** Waiter key for audit followers. */
const AUDIT_WAITERS = "*audit";
/** How often an admission is signed again because a rotation retired its key meanwhile, at most. */
const MAX_SIGNING_ATTEMPTS = 5;
const UNKNOWN_CLUSTER = (cluster: string) =>
  fail(404, "unknown_cluster", `cluster ${cluster} does not exist on this broker (an admin creates it with its first enrollment token)`);

/** What a queued ticket waits for besides its turn: the cluster is paused, or not yet bootstrapped. */
function queueBlocker(c: ClusterRow, row: TicketRow): { waitingFor?: "paused" | "bootstrap"; bootstrapNode?: string } {
  const facts = clusterFacts(c);
  if (facts.paused) return { waitingFor: "paused" };
  if (row.role === "join" && needsBootstrap(facts)) return { waitingFor: "bootstrap", ...(c.bootstrap_node ? { bootstrapNode: c.bootstrap_node } : {}) };
  return {};
}

export class JoinQueue extends DurableObject<Env> {
  readonly #store: QueueStore;
  readonly #commands: QueueCommands;
  readonly #waiters = new Waiters();
  readonly #credentials: Credentials;
  #admitting: Promise<unknown> = Promise.resolve();
  /** The alarm time last set (undefined: unknown, e.g. after a restart). */
  #alarmAt: number | null | undefined = undefined;
  /** Which state changes are logged (LOG_LEVEL); protected so that the bench can switch it. */
  protected logLevel: LogLevel;
  /** The object's time; tests and the bench advance it (`clock.advance`). Not an RPC method. */
  readonly clock = new Clock();
  /** The cluster index being told of this cluster, while it is. */
  #indexing: Promise<void> | null = null;
  /** How many long polls (tickets and audit) are held now: tests wait for theirs before the change that answers it. */
  get heldPolls(): number {
    return this.#waiters.size;
  }
  /** When false, only `alarm()` ends leases (tests of the alarm on its own). */
  settleLazily = true;
  /** How long history is kept (policy.ts); tests may shorten it. */
  retention: RetentionPolicy = DEFAULT_RETENTION;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.logLevel = parseLogLevel(env.LOG_LEVEL);
    this.#store = new QueueStore(ctx.storage.sql);
    this.#credentials = new Credentials(this.#store);
    this.#commands = new QueueCommands(this.#store, ctx.storage, {
      logLevel: () => this.logLevel,
      settleLazily: () => this.settleLazily,
      clusterName: () => this.ctx.id.name ?? "",
      retention: () => this.retention,
    });
    // Reads of a cluster that does not exist must not create storage: the schema is created with
    // the cluster (ensureCluster), and upgraded here for objects that have one.
    void ctx.blockConcurrencyWhile(async () => {
      if (!hasSchema(ctx.storage)) return;
      this.#migrate();
      // A self-hosted data directory restored from a backup: taken note of before any request.
      if (env.RESTORE_ID) this.noteRestore(env.RESTORE_ID);
      // A cluster made before the cluster index existed joins it the first time it wakes: in the
      // background, since the index is for people and a slow one must never hold the queue.
      if (ctx.id.name !== CLUSTER_INDEX_NAME) this.#joinIndexLater();
    });
  }

  // ---------------------------------------------------------------- the cluster index (its own instance)

  /** Adds a cluster to the index; called on the index's instance only. */
  async indexAdd(name: string, createdAtMs: number): Promise<void> {
    new ClusterIndex(this.ctx.storage.sql).add(name, createdAtMs);
  }

  /** Every cluster the index knows, by name; called on the index's instance only. */
  async indexList(): Promise<Outcome<{ clusters: IndexedCluster[] }>> {
    return { ok: true, status: 200, value: { clusters: new ClusterIndex(this.ctx.storage.sql).list() } };
  }

  // ---------------------------------------------------------------- read-only admin credentials

  /** Stores a read-only credential by its hash (never its secret); on the index's instance only. */
  async credentialCreate(input: { id: string; tokenHash: string; cluster: string | null; description: string | null }): Promise<Outcome<AdminCredentialView>> {
    const row = new AdminCredentials(this.ctx.storage).create({
      id: input.id,
      token_hash: input.tokenHash,
      cluster: input.cluster,
      description: input.description,
      created_at: this.clock.now(),
    });
    this.#logCredentialChange("admin_credential.created", row.id, row.cluster);
    return { ok: true, status: 201, value: adminCredentialView(row) };
  }

  async credentialList(): Promise<Outcome<{ credentials: AdminCredentialView[] }>> {
    return { ok: true, status: 200, value: { credentials: new AdminCredentials(this.ctx.storage).list().map(adminCredentialView) } };
  }

  async credentialRevoke(id: string): Promise<Outcome<AdminCredentialView & { changed: boolean }>> {
    const result = new AdminCredentials(this.ctx.storage).revoke(id, this.clock.now());
    if (!result) return fail(404, "not_found", `no admin credential ${id}`);
    if (result.changed) this.#logCredentialChange("admin_credential.revoked", id, result.row.cluster);
    return { ok: true, status: 200, value: { ...adminCredentialView(result.row), changed: result.changed } };
  }

  /** The active read-only credential with this hash: its id and the cluster it is limited to. */
  async credentialAuthenticate(tokenHash: string): Promise<{ id: string; cluster: string | null } | null> {
    const row = new AdminCredentials(this.ctx.storage).active(tokenHash);
    return row ? { id: row.id, cluster: row.cluster } : null;
  }

  /** A broker-wide credential's change as a log line; a cluster's own is logged with its audit entry. */
  #logCredentialChange(action: string, id: string, cluster: string | null): void {
    if (cluster !== null || !isLogged(actionLevel(action), this.logLevel)) return;
    console.log(JSON.stringify({ cluster: null, event: action, time: new Date(this.clock.now()).toISOString(), actor: "admin", subject: id, readOnly: true }));
  }

  /** A read-only credential for this cluster made or revoked: an entry in this cluster's audit log. */
  async recordCredentialChange(
    action: "admin_credential.created" | "admin_credential.revoked",
    id: string,
    detail: Record<string, unknown>,
  ): Promise<Outcome<{ recorded: true }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const now = this.clock.now();
    this.#commands.run(() => this.#commands.record(now, "admin", action, id, detail));
    await this.#afterCommand();
    return { ok: true, status: 200, value: { recorded: true } };
  }

  /** Starts `#joinIndex` unless it is under way; nothing waits for it. */
  #joinIndexLater(): void {
    this.#indexing ??= this.#joinIndex().finally(() => (this.#indexing = null));
  }

  /** Registers this cluster with the index once; a failure is retried the next time it wakes. */
  async #joinIndex(): Promise<void> {
    const c = this.#store.schemaReady ? this.#store.cluster() : null;
    if (!c || this.ctx.storage.kv.get(INDEXED_KEY)) return;
    try {
      await this.env.JOIN_QUEUE.getByName(CLUSTER_INDEX_NAME).indexAdd(c.name, c.created_at);
      this.ctx.storage.kv.put(INDEXED_KEY, true);
    } catch (e) {
      console.error(JSON.stringify({ cluster: c.name, event: "cluster_index.error", message: e instanceof Error ? e.message : String(e) }));
    }
  }

  // ---------------------------------------------------------------- node-facing

  async requestTicket(input: {
    cluster: string;
    bearer: string;
    node: string;
    peerURL: string;
    exclusiveUntilStarted?: boolean;
  }): Promise<Outcome<TicketView>> {
    // Which clusters exist is public (their JWKS): say plainly that the name is wrong, not the token.
    if (!this.#store.cluster())
      return fail(
        404,
        "unknown_cluster",
        `there is no cluster ${input.cluster} on this broker: check the cluster name the node was given (an enrollment token belongs to the one cluster it was created for)`,
      );
    const principal = await this.#credentials.authenticate(input.bearer, this.clock.now());
    if (!principal.ok) return principal;
    if (principal.value.kind !== "enrollment") return fail(403, "wrong_token_kind", "tickets are requested with an enrollment token, not an admission token");
    const outside = scopeProblem(principal.value.scope, input.node, input.peerURL);
    if (outside) return fail(403, "outside_token_scope", outside);
    const result = this.#commands.requestTicket(this.clock.now(), principal.value.id, input.node, input.peerURL, input.exclusiveUntilStarted ?? false);
    if (!result.ok) return result;
    if (result.value.kind === "adopted_member") return { ok: true, status: 200, value: this.#joinedWithoutTicket(this.#store.cluster()!, result.value.member) };
    const { id, created } = result.value;
    const admitted = await this.#afterCommand();
    // Only an admission can have changed a fresh row since it was written.
    const row = (!admitted.includes(id) && result.value.row) || this.#store.ticket(id)!;
    return this.#viewOutcome(row, created ? 201 : 200);
  }

  async getTicket(input: { bearer: string; ticket: string; waitSeconds: number; ifNoneMatch: string | null }): Promise<Outcome<TicketView>> {
    const principal = await this.#authenticate(input.bearer);
    if (!principal.ok) return principal;
    const read = this.#commands.readTicket(this.clock.now(), principal.value, input.ticket);
    await this.#afterCommand();
    if (!read.ok) return read;
    let row = this.#store.ticket(input.ticket)!;
    const waitMs = Math.min(LONG_POLL_MAX_MS, Math.max(0, input.waitSeconds * 1000));
    const unchanged = input.ifNoneMatch ? input.ifNoneMatch === ticketEtag(row) : row.state === "queued";
    if (waitMs > 0 && unchanged) {
      await this.#waiters.wait(row.id, waitMs);
      // The wait may have outlived the bearer's right to read: ask again.
      const again = this.#commands.readTicket(this.clock.now(), principal.value, input.ticket);
      await this.#afterCommand();
      if (!again.ok) return again;
      row = again.value;
    }
    return this.#viewOutcome(row, 200);
  }

  async heartbeat(input: { bearer: string; ticket: string }): Promise<Outcome<TicketView>> {
    const principal = await this.#authenticate(input.bearer);
    if (!principal.ok) return principal;
    const result = this.#commands.heartbeat(this.clock.now(), principal.value, input.ticket);
    await this.#afterCommand();
    if (!result.ok) return result;
    return this.#viewOutcome(result.value, 200);
  }

  async memberStarted(input: { bearer: string; ticket: string; memberID: string }): Promise<Outcome<TicketView>> {
    const principal = await this.#authenticate(input.bearer);
    if (!principal.ok) return principal;
    const result = this.#commands.memberStarted(this.clock.now(), principal.value, input.ticket, input.memberID);
    await this.#afterCommand();
    if (!result.ok) return result;
    return this.#viewOutcome(result.value, 200);
  }

  async memberStuck(input: { bearer: string; ticket: string; memberID: string; detail: string }): Promise<Outcome<TicketView>> {
    const principal = await this.#authenticate(input.bearer);
    if (!principal.ok) return principal;
    const result = this.#commands.memberStuck(this.clock.now(), principal.value, input.ticket, input.memberID, input.detail);
    await this.#afterCommand();
    if (!result.ok) return result;
    return this.#viewOutcome(result.value, 200);
  }

  async complete(input: { bearer: string; ticket: string; memberID: string }): Promise<Outcome<TicketView>> {
    const principal = await this.#authenticate(input.bearer);
    if (!principal.ok) return principal;
    const result = this.#commands.complete(this.clock.now(), principal.value, input.ticket, input.memberID);
    await this.#afterCommand();
    if (!result.ok) return result;
    return this.#viewOutcome(result.value, 200);
  }

  async abandon(input: { bearer: string; ticket: string }): Promise<Outcome<TicketView>> {
    const principal = await this.#authenticate(input.bearer);
    if (!principal.ok) return principal;
    const result = this.#commands.abandon(this.clock.now(), principal.value, input.ticket);
    await this.#afterCommand();
    if (!result.ok) return result;
    return this.#viewOutcome(result.value, 200);
  }

  // ---------------------------------------------------------------- controller-facing

  async jwks(): Promise<Outcome<{ keys: JWK[] }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const keys = this.#store.publishedKeys(this.clock.now()).map((k) => JSON.parse(k.public_jwk) as JWK);
    return { ok: true, status: 200, value: { keys } };
  }

  async revocations(): Promise<Outcome<{ revoked: { jti: string; exp: number; reason: string }[] }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    await this.#settle();
    const revoked = this.#store.inactiveUnexpired(Math.floor(this.clock.now() / 1000)).map((r) => ({ jti: r.jti, exp: r.expires_at, reason: r.status }));
    const etag = `W/"${(await sha256Hex(JSON.stringify(revoked))).slice(0, 32)}"`;
    return { ok: true, status: 200, value: { revoked }, etag };
  }

  async introspect(token: string): Promise<IntrospectResult> {
    if (!this.#store.cluster()) return { active: false, reason: "unknown_cluster" };
    const verified = await this.#credentials.verifyAdmission(token, this.clock.now());
    if (!verified) return { active: false, reason: "invalid" };
    if (verified.expired) return { active: false, reason: "expired" };
    const now = this.clock.now();
    this.#commands.settle(now);
    await this.#afterCommand();
    const { payload } = verified;
    const admission = this.#store.admission(String(payload.jti));
    const ticket = admission && this.#store.ticket(admission.ticket_id);
    const inactive = this.#commands.admissionInactive(now, String(payload.jti), Number(payload.exp), ticket);
    if (inactive) return { active: false, reason: inactive.reason as Extract<IntrospectResult, { active: false }>["reason"] };
    // When the lease ends unless its node heartbeats: a join API bounds an etcd change by it.
    return { active: true, claims: payload, leaseExpiresAt: iso(ticket?.lease_expires_at ?? null) };
  }

  // ---------------------------------------------------------------- admin

  async createEnrollmentToken(
    cluster: string,
    issuer: string,
    input: EnrollmentTokenInput,
  ): Promise<
    Outcome<{ id: string; token: string; expiresAt: string | null; maxUses: number | null; description?: string; nodes?: string[]; peerHosts?: string[] }>
  > {
    await this.#ensureCluster(cluster, issuer);
    const token = newEnrollmentToken();
    const id = randomId("enr_", 9);
    const hash = await sha256Hex(token);
    const now = this.clock.now();
    const expiresAt = input.ttlSeconds ? now + input.ttlSeconds * 1000 : null;
    this.#commands.run(() => {
      this.#store.insertEnrollmentToken({
        id,
        token_hash: hash,
        description: input.description ?? null,
        created_at: now,
        expires_at: expiresAt,
        max_uses: input.maxUses ?? null,
        nodes: input.nodes ? JSON.stringify(input.nodes) : null,
        peer_hosts: input.peerHosts ? JSON.stringify(input.peerHosts) : null,
      });
      this.#commands.record(now, "admin", "enrollment_token.created", id, {
        expiresAt: iso(expiresAt),
        maxUses: input.maxUses ?? null,
        description: input.description ?? null,
        nodes: input.nodes ?? null,
        peerHosts: input.peerHosts ?? null,
      });
    });
    await this.#afterCommand();
    return {
      ok: true,
      status: 201,
      value: {
        id,
        token,
        expiresAt: iso(expiresAt) ?? null,
        maxUses: input.maxUses ?? null,
        description: input.description,
        nodes: input.nodes,
        peerHosts: input.peerHosts,
      },
    };
  }

  async listEnrollmentTokens(): Promise<Outcome<{ tokens: ReturnType<typeof enrollmentTokenView>[] }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const now = this.clock.now();
    return { ok: true, status: 200, value: { tokens: this.#store.listEnrollmentTokens().map((t) => enrollmentTokenView(t, now)) } };
  }

  async revokeEnrollmentToken(id: string): Promise<Outcome<ReturnType<typeof enrollmentTokenView> & { changed: boolean }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const now = this.clock.now();
    const result = this.#commands.run(() => {
      if (!this.#store.enrollmentToken(id)) return null;
      const changed = this.#store.revokeEnrollmentToken(id, now);
      if (changed) this.#commands.record(now, "admin", "enrollment_token.revoked", id, {});
      return { row: this.#store.enrollmentToken(id)!, changed };
    });
    await this.#afterCommand();
    if (!result) return fail(404, "enrollment_token_not_found", `no enrollment token ${id}`);
    // `changed` is false when it had been revoked before: the call is idempotent, and says so.
    return { ok: true, status: 200, value: { ...enrollmentTokenView(result.row, now), changed: result.changed } };
  }

  async status(): Promise<Outcome<Record<string, unknown>>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    await this.#settle();
    const c = this.#store.cluster()!;
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
        restored: { at: iso(c.restored_at) ?? null, awaitingAdmin: awaitsAdmin(clusterFacts(c)) },
        paused: c.paused === 1,
        needsOperator: needsOperatorView(c.needs_operator),
        policy: clusterPolicy(c),
        queue: this.#store.liveCounts(),
        inFlight: admitted.map((t) => adminTicketView(c.name, t)),
        members: this.#store.members().map(memberView),
        signingKey: current?.kid ?? null,
        typicalAdmissionSeconds: Math.round(c.typical_admission_ms / 100) / 10,
        schemaVersion: SCHEMA_VERSION,
        databaseSizeBytes: this.ctx.storage.sql.databaseSize,
        retention: { ...this.retention, lastSweptAt: iso(c.swept_at || null) ?? null },
      },
    };
  }

  async metrics(): Promise<Outcome<string>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    await this.#settle();
    const c = this.#store.cluster()!;
    const snapshot = this.#store.metricsSnapshot(WAIT_BUCKETS_SECONDS);
    return {
      ok: true,
      status: 200,
      value: renderMetrics({
        cluster: c.name,
        paused: c.paused === 1,
        needsOperator: c.needs_operator !== null,
        bootstrapped: c.bootstrapped === 1 || c.adopted === 1,
        maxInFlight: c.max_in_flight,
        databaseSizeBytes: this.ctx.storage.sql.databaseSize,
        snapshot,
      }),
    };
  }

  async listTickets(input: {
    state: TicketState | null;
    limit: number;
    after: number;
  }): Promise<Outcome<{ tickets: ReturnType<typeof adminTicketView>[]; next: number | null }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    await this.#settle();
    const c = this.#store.cluster()!;
    const rows = this.#store.listTickets(input.state, input.limit, input.after);
    const next = rows.length === input.limit ? rows[rows.length - 1].seq : null;
    return { ok: true, status: 200, value: { tickets: rows.map((t) => adminTicketView(c.name, t)), next } };
  }

  async revokeAdmission(input: {
    jti: string;
    reason: string;
  }): Promise<Outcome<{ jti: string; ticket: string; node: string; status: string; changed: boolean }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const result = this.#commands.revokeAdmission(this.clock.now(), input.jti, input.reason);
    await this.#afterCommand();
    if (!result.ok) return result;
    const after = this.#store.admission(input.jti)!;
    return { ok: true, status: 200, value: { jti: after.jti, ticket: after.ticket_id, node: after.node, status: after.status, changed: result.value.changed } };
  }

  async setPaused(cluster: string, _issuer: string, paused: boolean): Promise<Outcome<{ paused: boolean }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(cluster);
    this.#commands.setPaused(this.clock.now(), cluster, paused);
    await this.#afterCommand();
    return { ok: true, status: 200, value: { paused } };
  }

  async setPolicy(cluster: string, _issuer: string, patch: Partial<QueuePolicy>): Promise<Outcome<QueuePolicy>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(cluster);
    const result = this.#commands.setPolicy(this.clock.now(), cluster, patch);
    await this.#afterCommand();
    if (!result.ok) return result;
    return { ok: true, status: 200, value: result.value };
  }

  async rotateKeys(): Promise<Outcome<{ kid: string; retired: string | null; keys: string[] }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const fresh = await generateSigningKey();
    const now = this.clock.now();
    const retired = this.#commands.rotateKey(now, { kid: fresh.kid, privateJwk: JSON.stringify(fresh.privateJwk), publicJwk: JSON.stringify(fresh.publicJwk) });
    await this.#afterCommand();
    const keys = this.#store.publishedKeys(now).map((k) => k.kid);
    return { ok: true, status: 200, value: { kid: fresh.kid, retired, keys } };
  }

  async adopt(
    cluster: string,
    issuer: string,
    members: { node: string; peerURL: string }[],
  ): Promise<Outcome<{ adopted: number; members: ReturnType<typeof memberView>[] }>> {
    await this.#ensureCluster(cluster, issuer);
    const result = this.#commands.adopt(this.clock.now(), cluster, members);
    await this.#afterCommand();
    if (!result.ok) return result;
    return { ok: true, status: 200, value: { adopted: members.length, members: this.#store.members().map(memberView) } };
  }

  async forgetMember(node: string): Promise<Outcome<{ forgotten: string }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const result = this.#commands.forgetMember(this.clock.now(), node);
    await this.#afterCommand();
    if (!result.ok) return result;
    return { ok: true, status: 200, value: { forgotten: node } };
  }

  /** Hands the bootstrap ticket to another node: an explicit admin act, never a timeout. */
  async reassignBootstrap(input: { node: string; reason: string }): Promise<Outcome<{ bootstrapNode: string; revoked: string | null }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const result = this.#commands.reassignBootstrap(this.clock.now(), input.node, input.reason);
    this.#waiters.notifyAll();
    await this.#afterCommand();
    if (!result.ok) return result;
    return { ok: true, status: 200, value: { bootstrapNode: input.node, revoked: result.value.revoked } };
  }

  /**
   * Takes note, once, of the restore `restoreId` of a self-hosted data directory (RESTORE_ID):
   * whether bootstrap now waits for an admin. Called at wake-up; not a route of the Worker.
   */
  noteRestore(restoreId: string): boolean {
    return this.#commands.markRestored(this.clock.now(), "system", "the data directory was restored from a backup", restoreId);
  }

  /** Marks the state restored from an earlier point (a point-in-time restore): bootstrap waits for an admin. */
  async markRestored(input: { reason: string }): Promise<Outcome<{ awaitingAdmin: boolean }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const awaitingAdmin = this.#commands.markRestored(this.clock.now(), "admin", input.reason);
    await this.#afterCommand();
    return { ok: true, status: 200, value: { awaitingAdmin } };
  }

  /** The admin's decision after a restore: the cluster never formed, its bootstrap may go ahead. */
  async allowBootstrap(input: { reason: string }): Promise<Outcome<{ changed: boolean }>> {
    if (!this.#store.cluster()) return UNKNOWN_CLUSTER(this.ctx.id.name ?? "");
    const result = this.#commands.allowBootstrap(this.clock.now(), input.reason);
    await this.#afterCommand();
    if (!result.ok) return result;
    return { ok: true, status: 200, value: result.value };
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

  /** Ends due leases (whatever `settleLazily` says), fills free slots, deletes expired history. */
  async alarm(): Promise<void> {
    this.#alarmAt = undefined;
    if (!this.#store.cluster()) return;
    const now = this.clock.now();
    this.#commands.settle(now, true);
    const c = this.#store.cluster()!;
    if (c.swept_at + this.retention.sweepIntervalSeconds * 1000 <= now) this.#commands.sweep(now);
    await this.#afterCommand(true);
  }

  // ---------------------------------------------------------------- internals

  #issuer(c: ClusterRow): string {
    return this.env.ISSUER || c.issuer;
  }

  #migrate(): void {
    migrate(this.ctx.storage, Date.now());
    this.#store.schemaReady = true;
    this.#store.forgetCached();
  }

  async #authenticate(bearer: string): Promise<{ ok: true; value: Principal } | Failure> {
    if (!this.#store.cluster()) return fail(401, "unauthorized", "unknown token");
    return this.#credentials.authenticate(bearer, this.clock.now());
  }

  /** Lazy settling for reads: due leases end before anything is read. */
  async #settle(): Promise<void> {
    this.#commands.settle(this.clock.now());
    await this.#afterCommand();
  }

  /**
   * What committed commands left to do: wake long polls, fill free slots, re-arm the alarm.
   * Resolves to the tickets admitted meanwhile.
   */
  async #afterCommand(rearm = false): Promise<string[]> {
    let effects = this.#commands.takeEffects();
    this.#waiters.notify(effects.tickets);
    if (effects.audit) this.#waiters.notify([AUDIT_WAITERS]);
    const admitted = await this.#admitWaiting();
    if (admitted.length) {
      const more = this.#commands.takeEffects();
      // The admitted answer now, and so does the new first in line: its next change is its own
      // admission, so its agent polls again at once and is held here when that comes. Further
      // back a moved position waits for the node's next poll: waking each of them would cost a
      // request per node per admission and make them poll again early, too.
      this.#waiters.notify([...more.tickets, ...this.#store.listTickets("queued", 1, 0).map((t) => t.id)]);
      this.#waiters.notify([AUDIT_WAITERS]);
      effects = { ...effects, leases: effects.leases || more.leases };
    }
    if (effects.leases || rearm || this.#alarmAt === undefined) await this.#armAlarm();
    return admitted;
  }

  async #ensureCluster(cluster: string, issuer: string): Promise<void> {
    if (this.#store.cluster()) return;
    if (!this.#store.schemaReady) this.#migrate();
    const key = await generateSigningKey();
    const now = this.clock.now();
    this.#commands.run(() => {
      if (this.#store.cluster()) return; // created while the key was being generated
      this.#store.createCluster(cluster, issuer, DEFAULT_POLICY, now);
      // Made after the last restore: no restore of this data directory predates it.
      this.#store.updateCluster({ swept_at: now, restore_id: this.env.RESTORE_ID || null });
      this.#store.insertKey({ kid: key.kid, private_jwk: JSON.stringify(key.privateJwk), public_jwk: JSON.stringify(key.publicJwk), created_at: now });
      this.#commands.record(now, "admin", "cluster.created", cluster, { issuer, policy: DEFAULT_POLICY, kid: key.kid });
    });
    this.#joinIndexLater();
  }

  #joinedWithoutTicket(c: ClusterRow, m: { node: string; peer_url: string; member_id: string | null; joined_at: number }): TicketView {
    return {
      ticket: "",
      cluster: c.name,
      node: m.node,
      peerURL: m.peer_url,
      state: "joined",
      role: "join",
      memberID: m.member_id ?? undefined,
      reason: "adopted member",
      createdAt: iso(m.joined_at)!,
    };
  }

  #viewOutcome(row: TicketRow, status: 200 | 201): Outcome<TicketView> {
    const c = this.#store.cluster()!;
    const policy = clusterPolicy(c);
    let queued: QueuedExtras | undefined;
    let admission: { token: string; expiresAt: number } | undefined;
    if (row.state === "queued") {
      const position = this.#store.position(row.seq);
      const typical = c.typical_admission_ms / 1000;
      queued = {
        position,
        retryAfter: retryAfterSeconds(position, typical, policy),
        estimatedWaitSeconds: estimatedWaitSeconds(position, typical, policy),
        ...queueBlocker(c, row),
      };
    }
    if (row.state === "admitted" && row.jti) {
      const a = this.#store.admission(row.jti);
      if (a) admission = { token: a.token, expiresAt: a.expires_at };
    }
    const value = ticketView(c.name, row, { queued, admission, maxInFlight: policy.maxInFlight });
    if (queued) return { ok: true, status: 202, value, etag: ticketEtag(row), retryAfter: queued.retryAfter };
    return { ok: true, status, value, etag: ticketEtag(row) };
  }

  /**
   * Admits queued tickets into free slots; resolves to the tickets it admitted. Serialized:
   * signing is async, so two runs must not plan at once. With no free slot, or nobody queued,
   * there is nothing to plan (a run already under way cannot have planned a newer ticket).
   */
  #admitWaiting(): Promise<string[]> {
    if (!this.#commands.hasOpenSlots()) return Promise.resolve([]);
    const run = this.#admitting.then(() => this.#admitOnce());
    this.#admitting = run.catch(() => undefined);
    return run;
  }

  /** Plans, signs (awaiting), then admits in one command that re-checks the key and each ticket. */
  async #admitOnce(): Promise<string[]> {
    for (let attempt = 0; attempt < MAX_SIGNING_ATTEMPTS; attempt++) {
      const plan = this.#commands.planAdmissions();
      if (!plan) return [];
      const c = this.#store.cluster()!;
      const { kid, key } = await this.#credentials.signingKey();
      const now = this.clock.now();
      const issuer = this.#issuer(c);
      const policy = clusterPolicy(c);
      const signed: SignedAdmission[] = await Promise.all(
        plan.tickets.map(async (t) => {
          const claims = admissionClaims({
            issuer,
            cluster: c.name,
            node: t.node,
            ticket: t.id,
            peerURL: t.peer_url,
            role: t.role,
            jti: randomId("adm_", 15),
            nowMs: now,
            ttlSeconds: policy.admissionTtlSeconds,
          });
          return { ticket: t, claims, token: await signAdmission(claims, kid, key) };
        }),
      );
      const admitted = this.#commands.admit(now, kid, signed);
      if (admitted !== "key_changed") return admitted;
    }
    throw new Error(`the signing key changed during each of ${MAX_SIGNING_ATTEMPTS} admission attempts`);
  }

  /** One alarm at the earliest lease end, or at the next retention sweep. */
  async #armAlarm(): Promise<void> {
    const c = this.#store.cluster();
    if (!c) return;
    const lease = this.#store.earliestLeaseEnd();
    const sweep = c.swept_at + this.retention.sweepIntervalSeconds * 1000;
    // Alarms run on real time: the clock's offset (tests) is taken off.
    const next = Math.min(lease ?? Number.POSITIVE_INFINITY, sweep) - this.clock.offsetMs;
    // An alarm set for "now" from inside alarm() is dropped locally: always at least 1 ms ahead.
    const at = Math.max(next, Date.now() + 1);
    if (this.#alarmAt === at) return;
    await this.ctx.storage.setAlarm(at);
    this.#alarmAt = at;
  }
}
