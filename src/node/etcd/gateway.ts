/**
 * A small client of etcd's v3 gRPC-JSON gateway (3.4+): membership calls, status and health.
 *
 * The gateway speaks the proto field names: uint64 values are decimal strings, defaults are
 * omitted (an unstarted member has no `name`, `isLearner` is absent when false), and the
 * response header uses snake_case (`cluster_id`, `member_id`). Every call goes to one endpoint
 * and moves on to the next one when that endpoint cannot be reached, times out, or answers as
 * something other than etcd's gateway (another server on that port), so a caller can hand it
 * every controller's client URL. etcd's own refusals come back as typed results, never as
 * exceptions: the caller decides which of them are "not now".
 *
 * With etcd's auth on, the gateway takes no client certificate as a user (it refuses one that
 * has a common name, and treats one without as nobody): a caller given `credentials` signs in
 * with a password, sends the token etcd returns on every call, and signs in again when etcd
 * says the token is unknown (simple tokens end after 5 idle minutes, per member).
 * @module
 */
import { nodeFetch } from "./tls-fetch.ts";
import { canonicalPeerUrl } from "../../shared/protocol/identifiers.ts";
import { knownEtcdMessages, type EtcdRefusal } from "./versions.ts";

export interface EtcdMember {
  /** Decimal uint64, as the gateway spells it. */
  id: string;
  /** Empty until the member's etcd has started and published itself. */
  name: string;
  peerURLs: string[];
  clientURLs: string[];
  isLearner: boolean;
  /** A member has started once it published its name (etcd sets name and client URLs together). */
  started: boolean;
}

export interface ResponseHeader {
  clusterId: string;
  memberId: string;
  raftTerm: string;
  /** The key-value store's revision (decimal), "" where etcd left it out: it moves with every write of a key, never with a membership change. */
  revision: string;
}

export interface EtcdStatus {
  header: ResponseHeader;
  version: string;
  /** Member ID of the leader this member knows of; empty without a leader. */
  leader: string;
  raftIndex: string;
  raftAppliedIndex: string;
  isLearner: boolean;
  errors: string[];
  endpoint: string;
}

/**
 * What went wrong, by type: one of etcd's refusals of a membership change (the version table's
 * `EtcdRefusal`, e.g. "too_many_learners", "unhealthy_cluster", "learner_not_ready"), or
 * `unavailable` (no endpoint answered, or etcd timed out or has no leader: try again later),
 * `bad_request` (the gateway rejected the request itself: a bug in the caller), `unknown`.
 */
export type EtcdErrorKind = EtcdRefusal | "unavailable" | "bad_request" | "unknown" | EtcdAuthRefusal;

/**
 * etcd's auth refusing a call: no user (`unauthenticated`: a client certificate alone, through
 * the gateway), a user without the right (`permission_denied`), or the gateway refusing a client
 * certificate that names a user it would ignore (`client_certificate_named`).
 */
export type EtcdAuthRefusal = "unauthenticated" | "permission_denied" | "client_certificate_named";

export interface EtcdError {
  kind: EtcdErrorKind;
  message: string;
  /** HTTP status of the gateway's answer; 0 when no endpoint answered. */
  httpStatus: number;
  /** gRPC status code from the body, when there was one. */
  grpcCode?: number;
  endpoint?: string;
}

export type EtcdResult<T> = { ok: true; value: T; endpoint: string } | { ok: false; error: EtcdError };

export interface MemberAddResult {
  header: ResponseHeader;
  member: EtcdMember;
  members: EtcdMember[];
}

export interface MemberListResult {
  header: ResponseHeader;
  members: EtcdMember[];
}

/** A call that must be answered by a time (ms since epoch, this machine's clock). */
export interface CallBound {
  /**
   * No endpoint is asked after it, and each is given at most until it: a change answered later
   * would be made after what allowed it (an admission's lease) may have ended.
   */
  deadline?: number;
}

export interface GatewayOptions {
  /** Per request and endpoint; a membership change without quorum hangs until it. Default 10 s. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  /** A user and password to sign in with when etcd's auth is on (ignored while it is off). */
  credentials?: { user: string; password: string };
  /** Where the token lives: gateways that share one sign in once between them (each sign-in is a raft entry). */
  session?: { token: string | null };
}

/** A key and its value, as `range` lists them. */
export interface KeyValue {
  key: string;
  value: string;
  modRevision: string;
}

/** One operation of a transaction: every one is applied, or none. */
export type TxnOp = { put: { key: string; value: string } } | { delete: { key: string } };

/** A key the transaction applies only if it still is as read: its mod revision then ("0": absent). */
export interface TxnGuard {
  key: string;
  modRevision: string;
}

// etcd's auth answers (auth/store.go, rpctypes), compared like the version table's.
const AUTH_MESSAGES: { text: string; kind: EtcdAuthRefusal }[] = [
  { text: "user name is empty", kind: "unauthenticated" },
  { text: "invalid auth token", kind: "unauthenticated" },
  { text: "user name not found", kind: "permission_denied" },
  { text: "permission denied", kind: "permission_denied" },
];
/** The gateway's plain-text refusal of a client certificate with a common name while auth is on (etcd's embed/serve.go). */
const NAMED_CERTIFICATE_REFUSAL = "CommonName of client sending a request against gateway will be ignored";

/** Turns `URL[,URL…]` (or a list) into distinct endpoint origins without trailing slashes. */
export function parseEndpoints(value: string | readonly string[]): string[] {
  const parts = (typeof value === "string" ? value.split(",") : value).map((s) => s.trim()).filter(Boolean);
  const out: string[] = [];
  for (const part of parts) {
    const url = new URL(part);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`etcd endpoint ${part} must use http or https`);
    const origin = `${url.protocol}//${url.host}`;
    if (!out.includes(origin)) out.push(origin);
  }
  if (out.length === 0) throw new Error("no etcd endpoint given");
  return out;
}

// etcd's messages, from the version table (src/node/etcd/versions.ts), longest first so "can only
// promote a learner member" never shadows "... which is in sync with leader". Compared without
// case and without the "etcdserver: " prefix, in case a proxy or a later release changes either.
const KNOWN_MESSAGES = knownEtcdMessages().map((m) => ({ text: bare(m.message), kind: (m.refusal ?? "unavailable") as EtcdErrorKind }));

function bare(message: string): string {
  return message
    .toLowerCase()
    .replace(/^etcdserver:\s*/, "")
    .trim();
}

/** The typed kind of an etcd error message (and gRPC code, when the message is unfamiliar). */
export function classifyEtcdError(message: string, grpcCode?: number): EtcdErrorKind {
  const text = bare(message);
  for (const known of KNOWN_MESSAGES) if (text.includes(known.text)) return known.kind;
  for (const known of AUTH_MESSAGES) if (text.includes(known.text)) return known.kind;
  if (grpcCode === 14 || grpcCode === 4 || grpcCode === 8) return "unavailable"; // Unavailable, DeadlineExceeded, ResourceExhausted
  if (grpcCode === 3) return "bad_request"; // InvalidArgument
  if (grpcCode === 5) return "member_not_found"; // NotFound: the only NotFound of the cluster API
  return "unknown";
}

/**
 * Whether a parsed JSON answer can have come from etcd's gateway. A success carries the response
 * `header` that etcd puts on every answer of this client's calls; an error is grpc-gateway's
 * body, a numeric gRPC `code` with an `error` and/or `message` string. The gateway answers 404
 * only for gRPC NotFound (code 5) and never 405. Anything else is another server on that port
 * (a proxy, a web app answering problem+json): that endpoint is as good as down.
 */
export function isGatewayAnswer(httpStatus: number, body: Record<string, unknown>): boolean {
  if (httpStatus >= 200 && httpStatus < 300 && body.error === undefined) return typeof body.header === "object" && body.header !== null;
  if (httpStatus === 405) return false;
  const code = body.code;
  if (typeof code !== "number" || !Number.isInteger(code) || code < 0 || code > 16) return false;
  if (httpStatus === 404 && code !== 5) return false;
  return typeof body.error === "string" || typeof body.message === "string";
}

/** Which errors mean "the cluster cannot take this change now, ask again later". */
export function isRetryableEtcdError(kind: EtcdErrorKind): boolean {
  return (
    kind === "too_many_learners" || kind === "unhealthy_cluster" || kind === "not_enough_started" || kind === "learner_not_ready" || kind === "unavailable"
  );
}

export class EtcdGateway {
  readonly endpoints: readonly string[];
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;
  readonly #credentials: GatewayOptions["credentials"];
  /** Start with the endpoint that answered last, so a dead first endpoint costs one timeout, not one per call. */
  #preferred = 0;
  /** etcd's auth token for `credentials` (simple tokens are good on every member); null until signed in. */
  readonly #session: { token: string | null };

  constructor(endpoints: string | readonly string[], options: GatewayOptions = {}) {
    this.endpoints = parseEndpoints(endpoints);
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#fetch = options.fetch ?? nodeFetch();
    this.#credentials = options.credentials;
    this.#session = options.session ?? { token: null };
  }

  async memberList(): Promise<EtcdResult<MemberListResult>> {
    return this.#call("/v3/cluster/member/list", {}, (body) => ({ header: readHeader(body), members: readMembers(body) }));
  }

  /** Adds a member; learners are the quorum-safe way (they never count toward quorum). */
  async memberAdd(peerURLs: readonly string[], options: { learner: boolean } & CallBound): Promise<EtcdResult<MemberAddResult>> {
    return this.#call(
      "/v3/cluster/member/add",
      { peerURLs, isLearner: options.learner },
      (body) => ({ header: readHeader(body), member: readMember(body.member), members: readMembers(body) }),
      undefined,
      options.deadline,
    );
  }

  /**
   * Promotes a learner, asking etcd's leader first. Only the leader can tell whether a learner is
   * in sync, so a follower forwards a promote over the peer port; etcd 3.4 with auth on drops the
   * caller's token on the way, its leader refuses the forwarded promote ("user name is empty"),
   * and the follower retries it until it answers "request timed out", 7 s later.
   */
  async memberPromote(id: string, options: CallBound = {}): Promise<EtcdResult<MemberListResult>> {
    const leader = await this.#leaderEndpoint();
    const order = leader ? [leader, ...this.endpoints.filter((e) => e !== leader)] : undefined;
    return this.#call("/v3/cluster/member/promote", { ID: id }, (body) => ({ header: readHeader(body), members: readMembers(body) }), order, options.deadline);
  }

  /** The client endpoint of etcd's leader: one of ours when it is among them, else its first advertised client URL; null when none is known. */
  async #leaderEndpoint(): Promise<string | null> {
    const status = await this.status();
    if (!status.ok || status.value.leader === "") return null;
    const { leader, header, endpoint } = status.value;
    if (leader === header.memberId) return endpoint;
    const list = await this.memberList();
    // etcd may also advertise a unix socket, which this client cannot reach.
    const urls = (list.ok ? (list.value.members.find((m) => m.id === leader)?.clientURLs ?? []) : []).filter((u) => /^https?:\/\//i.test(u));
    if (urls.length === 0) return null;
    const advertised = parseEndpoints(urls);
    return advertised.find((url) => this.endpoints.includes(url)) ?? advertised[0]!;
  }

  async memberRemove(id: string): Promise<EtcdResult<MemberListResult>> {
    return this.#call("/v3/cluster/member/remove", { ID: id }, (body) => ({ header: readHeader(body), members: readMembers(body) }));
  }

  /** Writes one key (etcd's KV, for the join API's own small records). */
  async put(key: string, value: string, options: CallBound = {}): Promise<EtcdResult<null>> {
    return this.#call("/v3/kv/put", { key: b64(key), value: b64(value) }, () => null, undefined, options.deadline);
  }

  /**
   * Several writes as one transaction: one raft entry however many keys it puts and deletes
   * (a delete of a key that is not there changes nothing).
   */
  async writeAll(puts: readonly { key: string; value: string }[], deletes: readonly string[] = [], options: CallBound = {}): Promise<EtcdResult<null>> {
    const success = [
      ...puts.map((p) => ({ requestPut: { key: b64(p.key), value: b64(p.value) } })),
      ...deletes.map((key) => ({ requestDeleteRange: { key: b64(key) } })),
    ];
    return this.#call("/v3/kv/txn", { success }, () => null, undefined, options.deadline);
  }

  /** Every key under `prefix` with its value (one linearizable read). */
  async getPrefix(prefix: string, options: CallBound = {}): Promise<EtcdResult<Map<string, string>>> {
    return this.#call(
      "/v3/kv/range",
      { key: b64(prefix), range_end: Buffer.from(prefixEnd(prefix)).toString("base64") },
      (body) => {
        const found = new Map<string, string>();
        for (const kv of Array.isArray(body.kvs) ? (body.kvs as { key?: string; value?: string }[]) : []) {
          found.set(Buffer.from(kv.key ?? "", "base64").toString("utf8"), Buffer.from(kv.value ?? "", "base64").toString("utf8"));
        }
        return found;
      },
      undefined,
      options.deadline,
    );
  }

  /** The value of one key, or null when there is none. */
  async get(key: string, options: CallBound = {}): Promise<EtcdResult<string | null>> {
    return this.#call(
      "/v3/kv/range",
      { key: b64(key) },
      (body) => {
        const kv = Array.isArray(body.kvs) ? (body.kvs[0] as { value?: string } | undefined) : undefined;
        return kv ? Buffer.from(kv.value ?? "", "base64").toString("utf8") : null;
      },
      undefined,
      options.deadline,
    );
  }

  async delete(key: string): Promise<EtcdResult<null>> {
    return this.#call("/v3/kv/deleterange", { key: b64(key) }, () => null);
  }

  /** Every key under `prefix`, with the revision the answer was read at. */
  async range(prefix: string, options: CallBound = {}): Promise<EtcdResult<{ revision: string; kvs: KeyValue[] }>> {
    return this.#call(
      "/v3/kv/range",
      { key: b64(prefix), range_end: Buffer.from(prefixEnd(prefix)).toString("base64") },
      (body) => ({
        revision: readHeader(body).revision,
        kvs: (Array.isArray(body.kvs) ? (body.kvs as Record<string, unknown>[]) : []).map((kv) => ({
          key: Buffer.from(str(kv.key), "base64").toString("utf8"),
          value: Buffer.from(str(kv.value), "base64").toString("utf8"),
          modRevision: str(kv.mod_revision ?? kv.modRevision),
        })),
      }),
      undefined,
      options.deadline,
    );
  }

  /**
   * Applies every operation in one transaction (one raft entry); the revision after it. With
   * `unchanged`, only if each of those keys still has the mod revision it was read at: otherwise
   * nothing is applied and `applied` is false.
   */
  async txn(ops: readonly TxnOp[], options: CallBound & { unchanged?: readonly TxnGuard[] } = {}): Promise<EtcdResult<{ revision: string; applied: boolean }>> {
    const success = ops.map((op) =>
      "put" in op ? { requestPut: { key: b64(op.put.key), value: b64(op.put.value) } } : { requestDeleteRange: { key: b64(op.delete.key) } },
    );
    const compare = (options.unchanged ?? []).map((g) => ({ key: b64(g.key), target: "MOD", result: "EQUAL", mod_revision: g.modRevision }));
    return this.#call(
      "/v3/kv/txn",
      compare.length ? { compare, success } : { success },
      // etcd's JSON leaves a false `succeeded` out; with no comparison a transaction always applies.
      (body) => ({ revision: readHeader(body).revision, applied: compare.length === 0 || body.succeeded === true }),
      undefined,
      options.deadline,
    );
  }

  /** An auth call (`/v3/auth/…`) with this body; etcd's refusal or null. */
  async auth(path: "user/add" | "user/grant" | "role/add" | "role/grant" | "enable", body: Record<string, unknown>): Promise<EtcdResult<null>> {
    return this.#call(`/v3/auth/${path}`, body, () => null);
  }

  /**
   * Signs in with the credentials: true when etcd gave a token, false when its auth is off (no
   * token needed), or etcd's refusal (a wrong password: "authentication failed").
   */
  async signIn(): Promise<EtcdResult<boolean>> {
    if (!this.#credentials) return { ok: true, value: false, endpoint: "" };
    const got = await this.#call(
      "/v3/auth/authenticate",
      { name: this.#credentials.user, password: this.#credentials.password },
      (body) => str(body.token),
      undefined,
      undefined,
      false,
    );
    if (got.ok) {
      this.#session.token = got.value || null;
      return { ok: true, value: this.#session.token !== null, endpoint: got.endpoint };
    }
    if (/authentication is not enabled/i.test(got.error.message)) {
      this.#session.token = null;
      return { ok: true, value: false, endpoint: got.error.endpoint ?? "" };
    }
    return got;
  }

  /** `maintenance/status` of the first endpoint that answers (or of the given one). */
  async status(endpoint?: string): Promise<EtcdResult<EtcdStatus>> {
    return this.#call(
      "/v3/maintenance/status",
      {},
      (body, from) => ({
        header: readHeader(body),
        version: str(body.version),
        leader: str(body.leader) === "0" ? "" : str(body.leader),
        raftIndex: str(body.raftIndex) || "0",
        raftAppliedIndex: str(body.raftAppliedIndex) || "0",
        isLearner: body.isLearner === true,
        errors: Array.isArray(body.errors) ? body.errors.map(String) : [],
        endpoint: from,
      }),
      endpoint ? [endpoint] : undefined,
    );
  }

  /**
   * etcd's own `GET /health` of one endpoint: true when it has a leader, no alarm and can serve
   * a quorum read. A learner never reports healthy here (it cannot serve that read).
   */
  async health(endpoint: string): Promise<boolean> {
    try {
      const res = await this.#fetch(`${endpoint}/health`, { signal: AbortSignal.timeout(this.#timeoutMs) });
      const body = (await res.json().catch(() => ({}))) as { health?: unknown };
      return res.ok && (body.health === true || body.health === "true");
    } catch {
      return false;
    }
  }

  /** The cluster ID and whether some endpoint reports a leader and no errors. */
  async clusterHealth(): Promise<{ healthy: boolean; clusterId: string | null; leader: string | null; endpoint: string | null; detail: string }> {
    const status = await this.status();
    if (!status.ok) return { healthy: false, clusterId: null, leader: null, endpoint: null, detail: status.error.message };
    const s = status.value;
    const healthy = s.leader !== "" && s.errors.length === 0;
    const detail = healthy ? `leader ${s.leader}` : s.errors.join("; ") || "no leader";
    return { healthy, clusterId: s.header.clusterId, leader: s.leader || null, endpoint: s.endpoint, detail };
  }

  async #call<T>(
    path: string,
    body: unknown,
    read: (body: Record<string, unknown>, endpoint: string) => T,
    only?: string[],
    deadline?: number,
    signIn = true,
  ): Promise<EtcdResult<T>> {
    // The token this request carries, taken now: calls run at once and share the session, so by
    // the time etcd answers another call may have signed in (or out).
    const sent = signIn ? this.#session.token : null;
    const first = await this.#callOnce(path, body, read, only, deadline, sent);
    // A token etcd does not know (ended after 5 idle minutes), or none sent while auth is on (etcd
    // says "user name is empty"; with client-certificate auth "user name not found", the gateway's
    // own certificate standing in; for a read "permission denied"): sign in, ask once more.
    const refused = !first.ok && (first.error.kind === "unauthenticated" || (first.error.kind === "permission_denied" && sent === null));
    if (refused && signIn && this.#credentials) {
      // Another call signed in meanwhile: its token will do, no second sign-in (each is a raft entry).
      const current = this.#session.token;
      if (current !== null && current !== sent) return this.#callOnce(path, body, read, only, deadline, current);
      const signed = await this.signIn();
      if (signed.ok && signed.value) return this.#callOnce(path, body, read, only, deadline, this.#session.token);
    }
    return first;
  }

  async #callOnce<T>(
    path: string,
    body: unknown,
    read: (body: Record<string, unknown>, endpoint: string) => T,
    only: string[] | undefined,
    deadline: number | undefined,
    token: string | null,
  ): Promise<EtcdResult<T>> {
    const order = only ?? this.endpoints.map((_, i) => this.endpoints[(this.#preferred + i) % this.endpoints.length]!);
    const unreachable: string[] = [];
    // The first member that called the cluster unhealthy: the answer when no later one does better.
    let unhealthy: EtcdError | null = null;
    for (const endpoint of order) {
      const left = deadline === undefined ? this.#timeoutMs : Math.min(this.#timeoutMs, deadline - Date.now());
      if (left <= 0) {
        unreachable.push(`${endpoint}: not asked, the call's deadline passed`);
        break;
      }
      let res: Response;
      let text: string;
      try {
        res = await this.#fetch(`${endpoint}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json", ...(token ? { authorization: token } : {}) },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(left),
        });
        text = await res.text();
      } catch (e) {
        unreachable.push(`${endpoint}: ${describeFetchError(e)}`);
        continue;
      }
      let parsed: Record<string, unknown> | null = null;
      try {
        parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
      } catch {
        parsed = null;
      }
      if (res.status === 400 && text.includes(NAMED_CERTIFICATE_REFUSAL)) {
        // etcd speaking, about our certificate: every endpoint would say the same.
        const message = `etcd's auth is on and its JSON gateway refuses a client certificate with a common name (it would ignore the user it names): give this client a certificate without one (${text.trim()})`;
        return { ok: false, error: { kind: "client_certificate_named", message, httpStatus: 400, endpoint } };
      }
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        // Not the gateway (a proxy's error page, say): this endpoint is as good as down.
        unreachable.push(`${endpoint}: HTTP ${res.status} with a body that is not JSON`);
        continue;
      }
      if (!isGatewayAnswer(res.status, parsed)) {
        // JSON, but not in etcd's words (another server's 404 problem, say): no etcd error to report.
        const type = res.headers.get("content-type")?.split(";")[0]?.trim();
        unreachable.push(`${endpoint}: HTTP ${res.status}${type ? ` ${type}` : ""} that is not etcd's gateway`);
        continue;
      }
      if (res.ok && parsed.error === undefined) {
        if (!only) this.#preferred = this.endpoints.indexOf(endpoint);
        return { ok: true, value: read(parsed, endpoint), endpoint };
      }
      const message = str(parsed.message) || str(parsed.error) || `HTTP ${res.status}`;
      const grpcCode = typeof parsed.code === "number" ? parsed.code : undefined;
      const kind = classifyEtcdError(message, grpcCode);
      // A member without a leader or timing out may be the odd one out: ask the next one. So may
      // one that calls the cluster unhealthy: etcd checks a membership change against the
      // connections of the member asked (mayAddMember: "local member has not been connected to
      // majority peers"), so another member, the leader say, may take it.
      if ((kind === "unavailable" || kind === "unhealthy_cluster") && endpoint !== order[order.length - 1]) {
        unreachable.push(`${endpoint}: ${message}`);
        if (kind === "unhealthy_cluster") unhealthy ??= { kind, message, httpStatus: res.status, grpcCode, endpoint };
        continue;
      }
      if (!only) this.#preferred = this.endpoints.indexOf(endpoint);
      return { ok: false, error: { kind, message, httpStatus: res.status, grpcCode, endpoint } };
    }
    if (unhealthy) return { ok: false, error: unhealthy };
    return { ok: false, error: { kind: "unavailable", message: `no etcd endpoint answered ${path}: ${unreachable.join("; ")}`, httpStatus: 0 } };
  }
}

function describeFetchError(e: unknown): string {
  if (e instanceof Error) {
    if (e.name === "TimeoutError" || e.name === "AbortError") return "timed out";
    // A certificate that failed the handshake, in words that name the file (tls-fetch.ts).
    if (e.name === "TlsHandshakeError") return e.message;
    const cause = (e as { cause?: { name?: string; code?: unknown; message?: string } }).cause;
    // A request ended by its signal's timeout, as node:http reports it (tls-fetch.ts): the cause is
    // the signal's DOMException, whose legacy numeric `code` (23) says nothing to a reader.
    if (cause?.name === "TimeoutError" || cause?.name === "AbortError") return "timed out";
    return (typeof cause?.code === "string" ? cause.code : undefined) ?? cause?.message ?? e.message;
  }
  return String(e);
}

/** The first key after every key with this prefix (etcd's range_end for a prefix). */
function prefixEnd(prefix: string): Uint8Array {
  const bytes = Buffer.from(prefix, "utf8");
  for (let i = bytes.length - 1; i >= 0; i--) {
    if (bytes[i]! < 0xff) {
      const end = bytes.subarray(0, i + 1);
      end[i] = bytes[i]! + 1;
      return end;
    }
  }
  return new Uint8Array([0]);
}

function b64(text: string): string {
  return Buffer.from(text, "utf8").toString("base64");
}

function str(v: unknown): string {
  return typeof v === "string" ? v : typeof v === "number" ? String(v) : "";
}

function readHeader(body: Record<string, unknown>): ResponseHeader {
  const h = (body.header ?? {}) as Record<string, unknown>;
  // snake_case from 3.4/3.5's default marshaler; camelCase in case a build sets OrigName false.
  return {
    clusterId: str(h.cluster_id ?? h.clusterId),
    memberId: str(h.member_id ?? h.memberId),
    raftTerm: str(h.raft_term ?? h.raftTerm),
    revision: str(h.revision),
  };
}

function readMember(m: unknown): EtcdMember {
  const r = (m ?? {}) as Record<string, unknown>;
  const name = str(r.name);
  const clientURLs = Array.isArray(r.clientURLs) ? r.clientURLs.map(String) : [];
  return {
    id: str(r.ID ?? r.id),
    name,
    peerURLs: Array.isArray(r.peerURLs) ? r.peerURLs.map(String) : [],
    clientURLs,
    isLearner: r.isLearner === true,
    started: name !== "" || clientURLs.length > 0,
  };
}

function readMembers(body: Record<string, unknown>): EtcdMember[] {
  return Array.isArray(body.members) ? body.members.map(readMember) : [];
}

/** The member whose peer URLs include this one, compared in their canonical form (peer-url.ts). */
export function memberByPeerUrl(members: readonly EtcdMember[], peerURL: string): EtcdMember | undefined {
  const want = canonicalPeerUrl(peerURL);
  return members.find((m) => m.peerURLs.some((u) => canonicalPeerUrl(u) === want));
}

/** `name=peerURL` for every peer URL, the `--initial-cluster` spelling; unnamed members get `nameForUnstarted(m)`. */
export function initialClusterEntries(members: readonly EtcdMember[], nameForUnstarted: (m: EtcdMember) => string | undefined): string[] {
  const out: string[] = [];
  for (const m of members) {
    const name = m.name || nameForUnstarted(m);
    if (!name) continue;
    for (const url of m.peerURLs) out.push(`${name}=${url}`);
  }
  return out;
}
