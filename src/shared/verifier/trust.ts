/**
 * What a verifier knows about one cluster of one broker: its public keys (the remote JWKS,
 * cached, refetched on an unknown `kid`), the broker's introspection call, and the last
 * revocation list it fetched. Runs on anything with `fetch` and WebCrypto (Node, Workers).
 * @module
 */
import { createLocalJWKSet, createRemoteJWKSet, customFetch, type JSONWebKeySet, type JWTPayload, type JWTVerifyGetKey } from "jose";

export type IntrospectReason = "revoked" | "expired" | "completed" | "abandoned" | "invalid" | "unknown_cluster" | "superseded" | "unknown" | (string & {});

export type IntrospectAnswer =
  | {
      active: true;
      claims: JWTPayload;
      /**
       * How long the admission's lease has left, in ms, as the broker counts it (its
       * `leaseExpiresAt` less the `Date` of its answer, so a skewed local clock does not matter);
       * absent when the broker did not say.
       */
      leaseRemainingMs?: number;
    }
  | { active: false; reason: IntrospectReason };

export interface RevocationSnapshot {
  /** jti → exp (seconds) of every admission that is no longer active but not yet expired. */
  revoked: Map<string, { exp: number; reason?: string }>;
  /** When the broker gave us this list (ms since epoch, our clock). */
  fetchedAt: number;
  etag: string | null;
}

export interface ClusterTrustOptions {
  /** The broker's URL (its origin is the tokens' `iss`). */
  broker: string;
  cluster: string;
  /** Pin these public keys instead of fetching the cluster's JWKS from the broker. */
  jwks?: JSONWebKeySet;
  /** How long fetched keys are used before a refetch; default 10 min (jose's default). */
  jwksCacheMaxAgeMs?: number;
  /** Least time between two JWKS fetches caused by unknown `kid`s; default 5 s. */
  jwksCooldownMs?: number;
  /** Per broker request; default 5 s. */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/** Thrown by `introspect`/`refreshRevocations` when the broker gave no usable answer. */
export class BrokerUnreachableError extends Error {
  override readonly name = "BrokerUnreachableError";
  readonly code = "ERR_BROKER_UNREACHABLE";
  /** The HTTP status, when the broker answered at all. */
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export class ClusterTrust {
  readonly broker: string;
  readonly cluster: string;
  /** Resolves a JWS header to the cluster's public key (jose's remote or local key set). */
  readonly keys: JWTVerifyGetKey;
  readonly #base: string;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  #revocations: RevocationSnapshot | null = null;
  /** HTTP status of the last JWKS answer, to tell "no such cluster" (404) from "broker down". */
  lastJwksStatus: number | null = null;

  constructor(options: ClusterTrustOptions) {
    this.broker = options.broker;
    this.cluster = options.cluster;
    // Keep a path prefix if the broker sits behind one; the issuer is the origin regardless.
    this.#base = options.broker.replace(/\/+$/, "");
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.#timeoutMs = options.timeoutMs ?? 5_000;
    if (options.jwks) {
      this.keys = createLocalJWKSet(options.jwks);
    } else {
      this.keys = createRemoteJWKSet(new URL(`${this.#base}/v1/clusters/${encodeURIComponent(options.cluster)}/jwks.json`), {
        cacheMaxAge: options.jwksCacheMaxAgeMs ?? 600_000,
        cooldownDuration: options.jwksCooldownMs ?? 5_000,
        timeoutDuration: this.#timeoutMs,
        [customFetch]: async (url, init) => {
          const res = await this.#fetch(url, init);
          this.lastJwksStatus = res.status;
          return res;
        },
      });
    }
  }

  /**
   * Fetches the cluster's public keys now rather than at the first token, so that the first
   * join does not wait for them (a remote key set only; pinned keys need nothing). True when
   * they were fetched; a failure is left to the first verification to meet and report.
   */
  async warmKeys(): Promise<boolean> {
    const remote = this.keys as JWTVerifyGetKey & { reload?: () => Promise<void> };
    if (typeof remote.reload !== "function") return false;
    try {
      await remote.reload();
      return true;
    } catch {
      return false;
    }
  }

  /** Asks the broker whether the token is active now. Throws BrokerUnreachableError if it cannot tell. */
  async introspect(token: string): Promise<IntrospectAnswer> {
    let res: Response;
    try {
      res = await this.#fetch(`${this.#base}/v1/clusters/${encodeURIComponent(this.cluster)}/admissions/introspect`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({ token }),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (e) {
      throw new BrokerUnreachableError(`introspection failed: ${describe(e)}`);
    }
    const body = (await res.json().catch(() => null)) as { active?: unknown; claims?: unknown; reason?: unknown; leaseExpiresAt?: unknown } | null;
    if (res.status !== 200 || !body || typeof body.active !== "boolean") {
      throw new BrokerUnreachableError(`introspection answered HTTP ${res.status}`, res.status);
    }
    if (body.active) {
      const claims = (body.claims ?? {}) as JWTPayload;
      const leaseEnd = typeof body.leaseExpiresAt === "string" ? Date.parse(body.leaseExpiresAt) : NaN;
      if (Number.isNaN(leaseEnd)) return { active: true, claims };
      // The Date header counts whole seconds: the broker's clock may be up to 999 ms past it, so
      // count from the latest it can be and never promise more lease than is left.
      const answered = Date.parse(res.headers.get("date") ?? "");
      return { active: true, claims, leaseRemainingMs: leaseEnd - (Number.isNaN(answered) ? Date.now() : answered + DATE_HEADER_RESOLUTION_MS - 1) };
    }
    return { active: false, reason: typeof body.reason === "string" ? body.reason : "unknown" };
  }

  /** Fetches the revocation list (conditionally, with the last ETag) and keeps it. */
  async refreshRevocations(now = Date.now()): Promise<RevocationSnapshot> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.#revocations?.etag) headers["if-none-match"] = this.#revocations.etag;
    let res: Response;
    try {
      res = await this.#fetch(`${this.#base}/v1/clusters/${encodeURIComponent(this.cluster)}/revocations`, {
        headers,
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (e) {
      throw new BrokerUnreachableError(`revocation list fetch failed: ${describe(e)}`);
    }
    if (res.status === 304 && this.#revocations) {
      await res.body?.cancel();
      this.#revocations = { ...this.#revocations, fetchedAt: now };
      return this.#revocations;
    }
    const body = (await res.json().catch(() => null)) as { revoked?: unknown } | null;
    if (res.status !== 200 || !body || !Array.isArray(body.revoked)) {
      throw new BrokerUnreachableError(`revocation list answered HTTP ${res.status}`, res.status);
    }
    const revoked = new Map<string, { exp: number; reason?: string }>();
    for (const entry of body.revoked as { jti?: unknown; exp?: unknown; reason?: unknown }[]) {
      if (typeof entry?.jti === "string")
        revoked.set(entry.jti, { exp: Number(entry.exp) || 0, reason: typeof entry.reason === "string" ? entry.reason : undefined });
    }
    this.#revocations = { revoked, fetchedAt: now, etag: res.headers.get("etag") };
    return this.#revocations;
  }

  /** The last revocation list fetched, if any. */
  revocations(): RevocationSnapshot | null {
    return this.#revocations;
  }
}

function describe(e: unknown): string {
  if (e instanceof Error) {
    if (e.name === "TimeoutError" || e.name === "AbortError") return "timed out";
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    return cause?.code ?? cause?.message ?? e.message;
  }
  return String(e);
}

/** An HTTP Date header names whole seconds. */
const DATE_HEADER_RESOLUTION_MS = 1000;

const shared = new Map<string, ClusterTrust>();

/** One ClusterTrust per (broker, cluster) for the life of the process or isolate. */
export function sharedClusterTrust(broker: string, cluster: string): ClusterTrust {
  const key = `${broker.replace(/\/+$/, "")}|${cluster}`;
  let trust = shared.get(key);
  if (!trust) {
    trust = new ClusterTrust({ broker, cluster });
    shared.set(key, trust);
  }
  return trust;
}
