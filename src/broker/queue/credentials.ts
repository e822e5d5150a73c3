/**
 * Who is calling: an enrollment token (looked up by its hash) or one of this cluster's admission
 * tokens (verified with the cluster's own public keys). Also the cluster's signing key, imported
 * once and kept while it is current.
 * @module
 */
import { decodeProtectedHeader, errors, importJWK, jwtVerify, type JWK, type JWTPayload, type ProtectedHeaderParameters } from "jose";
import { ADMISSION_ALG, ADMISSION_TYP, audienceFor, customClaimsProblem } from "../../shared/protocol/claims.ts";
import { importPrivateKey } from "../tokens/keys.ts";
import { ENROLLMENT_TOKEN_PREFIX, sha256Hex } from "../tokens/secrets.ts";
import type { TokenScope } from "../../shared/protocol/token-scope.ts";
import type { EnrollmentCredential, QueueStore } from "./store.ts";
import { fail, type Failure } from "./views.ts";

export type Principal =
  | { kind: "enrollment"; id: string; scope: TokenScope }
  | { kind: "admission"; jti: string; ticket: string; exp: number; payload: JWTPayload };

export interface VerifiedAdmission {
  payload: JWTPayload;
  /** Authentic but past `exp`: it still identifies its ticket, so a node can read why it ended. */
  expired: boolean;
}

export class Credentials {
  readonly #publicKeys = new Map<string, CryptoKey>();
  #signing: { kid: string; key: CryptoKey } | null = null;

  constructor(private readonly store: QueueStore) {}

  async authenticate(bearer: string, nowMs: number): Promise<{ ok: true; value: Principal } | Failure> {
    if (bearer.startsWith(ENROLLMENT_TOKEN_PREFIX)) {
      const row = this.store.enrollmentCredential(await sha256Hex(bearer));
      if (!row || row.revoked_at !== null || (row.expires_at !== null && row.expires_at <= nowMs)) {
        return fail(401, "unauthorized", row ? "the enrollment token is revoked or expired" : "unknown enrollment token");
      }
      return { ok: true, value: { kind: "enrollment", id: row.id, scope: enrollmentScope(row) } };
    }
    // An authentic but expired admission token still names its ticket: the ticket calls answer
    // it 410 (expired), so that the node learns why.
    const verified = await this.verifyAdmission(bearer, nowMs);
    if (!verified) return fail(401, "unauthorized", "the bearer token is neither a valid enrollment token nor an admission token of this cluster");
    const { payload } = verified;
    return { ok: true, value: { kind: "admission", jti: String(payload.jti), ticket: String(payload.ticket), exp: Number(payload.exp), payload } };
  }

  /** Signature, typ, alg, aud and the custom claims; not whether the admission is still active. */
  async verifyAdmission(token: string, nowMs: number): Promise<VerifiedAdmission | null> {
    const cluster = this.store.cluster();
    if (!cluster) return null;
    let header: ProtectedHeaderParameters;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      return null;
    }
    if (header.alg !== ADMISSION_ALG || header.typ !== ADMISSION_TYP || typeof header.kid !== "string") return null;
    const key = await this.#publicKey(header.kid);
    if (!key) return null;
    let payload: JWTPayload;
    let expired = false;
    try {
      ({ payload } = await jwtVerify(token, key, {
        algorithms: [ADMISSION_ALG],
        typ: ADMISSION_TYP,
        audience: audienceFor(cluster.name),
        clockTolerance: 30,
        currentDate: new Date(nowMs),
      }));
    } catch (e) {
      // jose checks the signature before the claims, so an expired token is an authentic one.
      if (!(e instanceof errors.JWTExpired)) return null;
      payload = e.payload;
      expired = true;
    }
    if (customClaimsProblem(payload as Record<string, unknown>, cluster.name)) return null;
    return { payload, expired };
  }

  /** The current signing key, imported once per rotation. Callers re-check `kid` is still current when they use what they signed. */
  async signingKey(): Promise<{ kid: string; key: CryptoKey }> {
    const current = this.store.currentKey();
    if (!current) throw new Error("cluster has no signing key");
    if (this.#signing?.kid !== current.kid) {
      this.#signing = { kid: current.kid, key: await importPrivateKey(JSON.parse(current.private_jwk) as JWK) };
    }
    return this.#signing;
  }

  async #publicKey(kid: string): Promise<CryptoKey | null> {
    const cached = this.#publicKeys.get(kid);
    if (cached) return cached;
    const row = this.store.key(kid);
    if (!row) return null;
    const key = (await importJWK(JSON.parse(row.public_jwk) as JWK, ADMISSION_ALG)) as CryptoKey;
    this.#publicKeys.set(kid, key);
    return key;
  }
}

/** The scope stored with an enrollment token (NULL columns: unrestricted). */
export function enrollmentScope(row: Pick<EnrollmentCredential, "nodes" | "peer_hosts">): TokenScope {
  return {
    ...(row.nodes === null ? {} : { nodes: JSON.parse(row.nodes) as string[] }),
    ...(row.peer_hosts === null ? {} : { peerHosts: JSON.parse(row.peer_hosts) as string[] }),
  };
}
