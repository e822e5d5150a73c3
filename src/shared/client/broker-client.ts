/**
 * A typed client for the broker's HTTP API (docs/protocol.md). Inputs are checked with the same zod
 * schemas that validate requests in the broker (src/shared/protocol/schemas.ts), so a bad argument fails
 * here with the broker's own message before anything is sent; answers are typed with the
 * broker's view types. Every call returns the parsed body together with its exact text.
 * @module
 */
import type { z } from "@hono/zod-openapi";
import {
  AdminCredentialId,
  AdminCredentialRequest,
  AdoptRequest,
  AuditQuery,
  BootstrapRequest,
  ClusterName,
  CompleteRequest,
  StartedRequest,
  EnrollmentTokenId,
  EnrollmentTokenRequest,
  IntrospectRequest,
  Jti,
  NodeName,
  PolicyRequest,
  RestoreDecisionRequest,
  RevokeRequest,
  TicketId,
  TicketListQuery,
  TicketRequest,
  WaitQuery,
} from "../protocol/schemas.ts";
import { InvalidInput } from "./errors.ts";
import { NodeSession } from "./node-session.ts";
import { Transport, type Reply, type RequestOptions, type TransportOptions } from "./transport.ts";
import type {
  AdminCredential,
  Adopted,
  AuditPage,
  ClusterStatus,
  CreatedEnrollmentToken,
  EnrollmentToken,
  Introspection,
  Jwks,
  QueuePolicy,
  RevocationList,
  RevokedAdmission,
  RotatedKeys,
  TicketList,
  TicketView,
} from "../protocol/wire.ts";

export type EnrollmentTokenInput = z.input<typeof EnrollmentTokenRequest>;
export type PolicyInput = z.input<typeof PolicyRequest>;
export type AdoptInput = z.input<typeof AdoptRequest>;
export type BootstrapInput = z.input<typeof BootstrapRequest>;
export type TicketListInput = z.input<typeof TicketListQuery>;
export type AuditInput = z.input<typeof AuditQuery>;

/** Checks an enrollment token request as the broker would, without sending it (throws InvalidInput). */
export function checkEnrollmentTokenInput(input: EnrollmentTokenInput): void {
  check(EnrollmentTokenRequest, input, "enrollment token");
}

/** Parses with a broker schema; a failure is an InvalidInput that says what and why. */
function check<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const why = result.error.issues.map((i) => (i.path.length ? `${i.path.join(".")}: ${i.message}` : i.message)).join("; ");
  const issues = result.error.issues.map((i) => {
    const bounds = i as { minimum?: number | bigint; maximum?: number | bigint };
    return {
      path: i.path.join("."),
      message: i.message,
      code: i.code,
      ...(bounds.minimum !== undefined ? { minimum: Number(bounds.minimum) } : {}),
      ...(bounds.maximum !== undefined ? { maximum: Number(bounds.maximum) } : {}),
    };
  });
  throw new InvalidInput(`${what}: ${why}`, issues);
}

const segment = (value: string) => encodeURIComponent(value);

export type AdminCredentialInput = z.input<typeof AdminCredentialRequest>;

export class BrokerClient {
  readonly transport: Transport;
  readonly #fetch?: typeof fetch;

  constructor(options: TransportOptions) {
    this.transport = new Transport(options);
    this.#fetch = options.fetch;
  }

  /** The admin API of one cluster; the client must carry the ADMIN_TOKEN. */
  admin(cluster: string): AdminClient {
    return new AdminClient(this.transport, check(ClusterName, cluster, "cluster"));
  }

  /** The node-facing and controller-facing API of one cluster. */
  cluster(cluster: string): ClusterClient {
    return new ClusterClient(this.transport, check(ClusterName, cluster, "cluster"));
  }

  /** The clusters on this broker, by name (admin token). */
  clusters(): Promise<Reply<{ clusters: { name: string; createdAt: string }[] }>> {
    return this.transport.request("GET", "/v1/admin/clusters");
  }

  /** Creates a read-only admin credential, for the broker or one cluster; the secret is in the answer only. */
  createCredential(input: AdminCredentialInput): Promise<Reply<AdminCredential & { token: string }>> {
    return this.transport.request("POST", "/v1/admin/credentials", { body: check(AdminCredentialRequest, input, "admin credential") });
  }

  listCredentials(): Promise<Reply<{ credentials: AdminCredential[] }>> {
    return this.transport.request("GET", "/v1/admin/credentials");
  }

  /** Revokes a read-only credential; `changed` is false when it had been revoked already. */
  revokeCredential(id: string): Promise<Reply<AdminCredential & { changed: boolean }>> {
    return this.transport.request("DELETE", `/v1/admin/credentials/${segment(check(AdminCredentialId, id, "admin credential id"))}`);
  }

  /** What the client's bearer may do on the admin API. */
  whoami(): Promise<Reply<{ readOnly: boolean; id?: string; cluster: string | null }>> {
    return this.transport.request("GET", "/v1/admin/whoami");
  }

  /** A node's session for one cluster (the agent's calls), with its enrollment token. */
  nodeSession(cluster: string, enrollmentToken: string, timeoutMs?: number): NodeSession {
    return new NodeSession(this.transport.baseUrl, check(ClusterName, cluster, "cluster"), enrollmentToken, timeoutMs, this.#fetch);
  }

  /** The broker's OpenAPI 3.1 document. */
  openapi(): Promise<Reply<Record<string, unknown>>> {
    return this.transport.request("GET", "/openapi.json");
  }
}

/** Calls on one cluster's resources, below `prefix`/CLUSTER. */
abstract class ClusterScope {
  readonly #t: Transport;
  readonly #base: string;
  readonly cluster: string;

  constructor(transport: Transport, cluster: string, prefix: string) {
    this.#t = transport;
    this.cluster = cluster;
    this.#base = `${prefix}/${segment(cluster)}`;
  }

  /** A request to `path` below the cluster's own path ("" for that path itself). */
  protected request<T>(method: string, path: string, options?: RequestOptions): Promise<Reply<T>> {
    return this.#t.request(method, `${this.#base}${path}`, options);
  }
}

export class AdminClient extends ClusterScope {
  constructor(transport: Transport, cluster: string) {
    super(transport, cluster, "/v1/admin/clusters");
  }

  /** Creates an enrollment token (and the cluster, if this is its first). The secret is in the answer only. */
  createEnrollmentToken(input: EnrollmentTokenInput = {}): Promise<Reply<CreatedEnrollmentToken>> {
    return this.request("POST", "/enrollment-tokens", { body: check(EnrollmentTokenRequest, input, "enrollment token") });
  }

  listEnrollmentTokens(): Promise<Reply<{ tokens: EnrollmentToken[] }>> {
    return this.request("GET", "/enrollment-tokens");
  }

  /** Revokes an enrollment token; `changed` is false when it had been revoked already. */
  revokeEnrollmentToken(id: string): Promise<Reply<EnrollmentToken & { changed?: boolean }>> {
    return this.request("DELETE", `/enrollment-tokens/${segment(check(EnrollmentTokenId, id, "enrollment token id"))}`);
  }

  status(): Promise<Reply<ClusterStatus>> {
    return this.request("GET", "");
  }

  tickets(input: TicketListInput = {}): Promise<Reply<TicketList>> {
    return this.request("GET", "/tickets", { query: check(TicketListQuery, input, "ticket query") });
  }

  /** Ends an admission now: introspection says inactive at once, the revocation list on its next read. */
  revokeAdmission(jti: string, reason: string): Promise<Reply<RevokedAdmission>> {
    const id = check(Jti, jti, "jti");
    return this.request("POST", `/admissions/${segment(id)}/revoke`, { body: check(RevokeRequest, { reason }, "revoke") });
  }

  pause(): Promise<Reply<{ paused: boolean }>> {
    return this.request("POST", "/pause");
  }

  resume(): Promise<Reply<{ paused: boolean }>> {
    return this.request("POST", "/resume");
  }

  /** The queue policy. */
  policy(): Promise<Reply<QueuePolicy>> {
    return this.request("GET", "/policy");
  }

  /** Changes the given policy fields; the others keep their value. */
  setPolicy(patch: PolicyInput): Promise<Reply<QueuePolicy>> {
    return this.request("PUT", "/policy", { body: check(PolicyRequest, patch, "policy") });
  }

  rotateKeys(): Promise<Reply<RotatedKeys>> {
    return this.request("POST", "/keys/rotate");
  }

  /** Declares an existing etcd cluster and its members: it will never get a bootstrap ticket. */
  adopt(members: AdoptInput["members"]): Promise<Reply<Adopted>> {
    return this.request("POST", "/adopt", { body: check(AdoptRequest, { members }, "adopt") });
  }

  /** Forgets a member so that the node may ask for a ticket again. */
  forgetMember(node: string): Promise<Reply<{ forgotten: string }>> {
    return this.request("DELETE", `/members/${segment(check(NodeName, node, "node"))}`);
  }

  /** Hands the bootstrap ticket to another node (revoking the old holder's ticket). */
  reassignBootstrap(input: BootstrapInput): Promise<Reply<{ bootstrapNode: string; revoked: string | null }>> {
    return this.request("POST", "/bootstrap", { body: check(BootstrapRequest, input, "bootstrap") });
  }

  /** Marks the cluster's state restored from an earlier point: no bootstrap until an admin decides. */
  markRestored(reason: string): Promise<Reply<{ awaitingAdmin: boolean }>> {
    return this.request("POST", "/restored", { body: check(RestoreDecisionRequest, { reason }, "restored") });
  }

  /** After a restore: the cluster never formed, so its bootstrap may go ahead. */
  allowBootstrap(reason: string): Promise<Reply<{ changed: boolean }>> {
    return this.request("POST", "/bootstrap/allow", { body: check(RestoreDecisionRequest, { reason }, "bootstrap allow") });
  }

  /** Audit entries after `after`; with `wait`, the broker holds the request until there is one. */
  audit(input: AuditInput = {}, signal?: AbortSignal): Promise<Reply<AuditPage>> {
    const query = check(AuditQuery, input, "audit query");
    return this.request("GET", "/audit", { query, waitSeconds: query.wait ?? 0, signal });
  }

  /** The cluster's queue metrics in the Prometheus text format. */
  metrics(): Promise<Reply<string>> {
    return this.request("GET", "/metrics", { text: true });
  }
}

export class ClusterClient extends ClusterScope {
  constructor(transport: Transport, cluster: string) {
    super(transport, cluster, "/v1/clusters");
  }

  /** Asks for (or finds again) the node's ticket; the client must carry an enrollment token. */
  requestTicket(node: string, peerURL: string, options: { exclusiveUntilStarted?: boolean } = {}): Promise<Reply<TicketView>> {
    return this.request("POST", "/tickets", { body: check(TicketRequest, { node, peerURL, ...options }, "ticket request") });
  }

  /** Reads a ticket; with `wait` the broker holds the request until the view changes (long poll). */
  ticket(ticket: string, wait?: number, signal?: AbortSignal): Promise<Reply<TicketView>> {
    const query = check(WaitQuery, { wait }, "wait");
    return this.request("GET", `/tickets/${segment(check(TicketId, ticket, "ticket"))}`, { query, waitSeconds: query.wait ?? 0, signal });
  }

  heartbeat(ticket: string): Promise<Reply<TicketView>> {
    return this.request("POST", `/tickets/${segment(check(TicketId, ticket, "ticket"))}/heartbeat`);
  }

  /** Reports the node's etcd member started: under the start rule the next node may be admitted. */
  memberStarted(ticket: string, memberID: string): Promise<Reply<TicketView>> {
    const body = check(StartedRequest, { memberID }, "started");
    return this.request("POST", `/tickets/${segment(check(TicketId, ticket, "ticket"))}/started`, { body });
  }

  complete(ticket: string, memberID: string): Promise<Reply<TicketView>> {
    const body = check(CompleteRequest, { memberID }, "complete");
    return this.request("POST", `/tickets/${segment(check(TicketId, ticket, "ticket"))}/complete`, { body });
  }

  abandon(ticket: string): Promise<Reply<TicketView>> {
    return this.request("DELETE", `/tickets/${segment(check(TicketId, ticket, "ticket"))}`);
  }

  jwks(): Promise<Reply<Jwks>> {
    return this.request("GET", "/jwks.json");
  }

  revocations(): Promise<Reply<RevocationList>> {
    return this.request("GET", "/revocations");
  }

  introspect(token: string): Promise<Reply<Introspection>> {
    return this.request("POST", "/admissions/introspect", { body: check(IntrospectRequest, { token }, "introspect") });
  }
}
