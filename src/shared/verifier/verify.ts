/**
 * `verifyAdmission`: is this admission token good for adding this node's etcd member now?
 *
 * In order: the signature with the cluster's key (pinned `alg` EdDSA, `kid` looked up in the
 * cluster's JWKS), `typ`, `iss`, `aud`, `exp`/`nbf` with a clock tolerance, the required claims;
 * then the binding to the request (`sub` = node, `peer_url` = peer, `role`); then whether the
 * admission is still active, by asking the broker (introspection). Only when explicitly allowed
 * does an unreachable broker fall back to a revocation list fetched a short while ago.
 * @module
 */
import { errors, jwtVerify, type JWTPayload } from "jose";
import { canonicalPeerUrl } from "../protocol/identifiers.ts";
import { ADMISSION_ALG, ADMISSION_TYP, REQUIRED_CLAIMS, audienceFor, customClaimsProblem, issuerFor, type AdmissionClaims } from "../protocol/claims.ts";
import { AdmissionError, ForbiddenAdmissionError, InactiveAdmissionError, InvalidAdmissionError, VerifierUnavailableError } from "./errors.ts";
import { BrokerUnreachableError, sharedClusterTrust, type ClusterTrust, type IntrospectAnswer } from "./trust.ts";

export interface VerifyAdmissionOptions {
  /** The broker's URL; tokens must carry its origin as `iss`. */
  broker: string;
  cluster: string;
  /** The node the request is for: must equal `sub`. */
  node: string;
  /** The peer URL the request would add: must equal `peer_url`. Omit only where the request names no peer (promote). */
  peerURL?: string;
  /** Which `role` may pass; default `join` (a bootstrap node never asks a join API to add it). */
  role?: "join" | "bootstrap" | "any";
  /** Seconds of clock skew allowed on `exp`, `nbf` and `iat`; default 30. */
  clockToleranceSeconds?: number;
  /**
   * How to check that the admission is still active:
   * - `introspect` (default): ask the broker every time; if it cannot be reached, refuse with 503.
   * - `none`: do not check (signature, claims and binding only). For tests and offline tooling.
   */
  activeCheck?: "introspect" | "none";
  /**
   * Explicit opt-in: when the broker cannot be reached for introspection, accept a token whose
   * `jti` is not on a revocation list fetched at most `maxAgeSeconds` ago (fetching a fresh one
   * first if possible). A token revoked after that fetch is then accepted, so keep this short.
   */
  revocationListFallback?: { maxAgeSeconds: number };
  /** The cluster's keys and broker calls; default: one shared per (broker, cluster). */
  trust?: ClusterTrust;
  /** The verifier's clock (ms since epoch); default Date.now. */
  now?: () => number;
}

export interface VerifiedAdmission {
  claims: AdmissionClaims;
  /** How activeness was established. */
  activeBy: "introspection" | "revocation-list" | "unchecked";
  /** The broker's answer when activeness was established by introspection (with the lease left, when the broker said). */
  introspection?: Extract<IntrospectAnswer, { active: true }>;
}

export async function verifyAdmission(token: string, options: VerifyAdmissionOptions): Promise<VerifiedAdmission> {
  const claims = await verifyAdmissionClaims(token, options);
  checkBinding(claims, options);
  const active = await checkActive(token, claims, options);
  return active.by === "introspection" ? { claims, activeBy: active.by, introspection: active.answer } : { claims, activeBy: active.by };
}

/** Signature and claims only: no binding to a request, no activeness. */
export async function verifyAdmissionClaims(
  token: string,
  options: Pick<VerifyAdmissionOptions, "broker" | "cluster" | "clockToleranceSeconds" | "trust" | "now">,
): Promise<AdmissionClaims> {
  if (typeof token !== "string" || token.length === 0 || token.length > 8192)
    throw new InvalidAdmissionError("invalid_token", "no admission token, or an oversized one", "malformed");
  const trust = options.trust ?? sharedClusterTrust(options.broker, options.cluster);
  let payload: JWTPayload;
  const expected = { issuer: issuerFor(options.broker), audience: audienceFor(options.cluster) };
  try {
    ({ payload } = await jwtVerify(token, trust.keys, {
      algorithms: [ADMISSION_ALG],
      typ: ADMISSION_TYP,
      ...expected,
      requiredClaims: [...REQUIRED_CLAIMS],
      clockTolerance: options.clockToleranceSeconds ?? 30,
      currentDate: options.now ? new Date(options.now()) : undefined,
    }));
  } catch (e) {
    throw joseFailure(e, trust, expected);
  }
  const problem = customClaimsProblem(payload as Record<string, unknown>, options.cluster);
  if (problem) throw new InvalidAdmissionError("invalid_token", problem, "claims");
  return payload as unknown as AdmissionClaims;
}

function checkBinding(claims: AdmissionClaims, options: VerifyAdmissionOptions): void {
  if (claims.sub !== options.node) {
    throw new ForbiddenAdmissionError("wrong_node", `the admission token is for node ${claims.sub}, not ${options.node}`, "sub");
  }
  if (options.peerURL !== undefined && canonicalPeerUrl(claims.peer_url) !== canonicalPeerUrl(options.peerURL)) {
    throw new ForbiddenAdmissionError("wrong_peer_url", `the admission token is for peer URL ${claims.peer_url}, not ${options.peerURL}`, "peer_url");
  }
  const role = options.role ?? "join";
  if (role !== "any" && claims.role !== role) {
    throw new ForbiddenAdmissionError("wrong_role", `the admission token's role is ${claims.role}; this call needs ${role}`, "role");
  }
}

async function checkActive(
  token: string,
  claims: AdmissionClaims,
  options: VerifyAdmissionOptions,
): Promise<{ by: "introspection"; answer: Extract<IntrospectAnswer, { active: true }> } | { by: "revocation-list" | "unchecked" }> {
  if ((options.activeCheck ?? "introspect") === "none") return { by: "unchecked" };
  const trust = options.trust ?? sharedClusterTrust(options.broker, options.cluster);
  let unreachable: BrokerUnreachableError;
  try {
    const answer = await trust.introspect(token);
    if (answer.active) return { by: "introspection", answer };
    throw inactive(answer.reason, claims.jti);
  } catch (e) {
    if (!(e instanceof BrokerUnreachableError)) throw e;
    unreachable = e;
  }
  const fallback = options.revocationListFallback;
  if (!fallback) throw new VerifierUnavailableError(`cannot ask the broker whether the admission is active: ${unreachable.message}`, "introspection");
  const listed = await revocationListStatus(trust, claims.jti, fallback.maxAgeSeconds, options.now?.() ?? Date.now());
  if (!listed.ok)
    throw new VerifierUnavailableError(
      `the broker cannot be reached and the revocation list is ${listed.age} (limit ${fallback.maxAgeSeconds} s)`,
      "revocation_list_stale",
    );
  if (!listed.active) throw inactive(listed.reason, claims.jti);
  return { by: "revocation-list" };
}

/**
 * The opt-in offline answer for an admission, when introspection cannot be had: the broker's
 * revocation list (refreshed first if the broker answers that), if it is at most `maxAgeSeconds`
 * old. Not listed means active; no recent list means no answer (`ok: false`, with its age).
 */
export async function revocationListStatus(
  trust: ClusterTrust,
  jti: string,
  maxAgeSeconds: number,
  now: number,
): Promise<{ ok: true; active: true } | { ok: true; active: false; reason: string } | { ok: false; age: string }> {
  let list = trust.revocations();
  try {
    list = await trust.refreshRevocations(now);
  } catch {
    // Expected while the broker is away; the list we already hold may still be recent enough.
  }
  if (!list || now - list.fetchedAt > maxAgeSeconds * 1000)
    return { ok: false, age: list ? `${Math.round((now - list.fetchedAt) / 1000)} s old` : "never fetched" };
  const entry = list.revoked.get(jti);
  return entry ? { ok: true, active: false, reason: entry.reason ?? "revoked" } : { ok: true, active: true };
}

/** The typed error for an introspection reason (or a revocation list entry's status). */
export function inactive(reason: string, jti: string): AdmissionError {
  switch (reason) {
    case "revoked":
      return new InactiveAdmissionError("admission_revoked", `admission ${jti} was revoked`, reason);
    case "completed":
      return new InactiveAdmissionError("admission_completed", `admission ${jti} was already used: its node joined`, reason);
    case "expired":
      return new InactiveAdmissionError("token_expired", `admission ${jti} has expired`, reason);
    case "abandoned":
    case "superseded":
      return new InactiveAdmissionError("admission_inactive", `admission ${jti} is no longer active (${reason})`, reason);
    default:
      // invalid, unknown, unknown_cluster: the broker does not recognise it as one of its admissions.
      return new InvalidAdmissionError("invalid_token", `the broker does not know admission ${jti} as active (${reason})`, reason);
  }
}

function joseFailure(e: unknown, trust: ClusterTrust, expected: { issuer: string; audience: string }): AdmissionError {
  if (e instanceof AdmissionError) return e;
  if (e instanceof errors.JWTExpired) return new InactiveAdmissionError("token_expired", "the admission token has expired", "exp");
  if (e instanceof errors.JWTClaimValidationFailed) {
    if (e.claim === "nbf" || (e.claim === "iat" && e.reason === "check_failed")) {
      return new InvalidAdmissionError("token_not_yet_valid", `the admission token is not valid yet (${e.claim})`, e.claim);
    }
    // The usual cause is one broker reached by two names (localhost and 127.0.0.1): show both.
    if (e.claim === "iss") {
      return new InvalidAdmissionError(
        "invalid_token",
        `the admission token was issued by ${JSON.stringify(e.payload.iss)}, and this verifier expects ${JSON.stringify(expected.issuer)} (the broker URL it was given): use the same address for the broker everywhere`,
        e.claim,
      );
    }
    if (e.claim === "aud") {
      return new InvalidAdmissionError(
        "invalid_token",
        `the admission token is for audience ${JSON.stringify(e.payload.aud)}, and this verifier expects ${JSON.stringify(expected.audience)} (its cluster): check the cluster name`,
        e.claim,
      );
    }
    return new InvalidAdmissionError("invalid_token", `the admission token's ${e.claim} is wrong: ${e.message}`, e.claim);
  }
  if (e instanceof errors.JWKSNoMatchingKey) return new InvalidAdmissionError("unknown_key", "no key of this cluster matches the token's kid", e.code);
  if (e instanceof errors.JWKSTimeout) return new VerifierUnavailableError("the cluster's JWKS could not be fetched in time", e.code);
  if (
    e instanceof errors.JOSEAlgNotAllowed ||
    e instanceof errors.JWSSignatureVerificationFailed ||
    e instanceof errors.JWSInvalid ||
    e instanceof errors.JWTInvalid ||
    e instanceof errors.JOSENotSupported ||
    e instanceof errors.JWKSMultipleMatchingKeys
  ) {
    return new InvalidAdmissionError("invalid_token", `not a valid admission token: ${e.message}`, e.code);
  }
  if (e instanceof errors.JOSEError && trust.lastJwksStatus === 404) {
    return new InvalidAdmissionError("invalid_token", `the broker does not know cluster ${trust.cluster}`, "unknown_cluster");
  }
  // No JWKS (network error, 5xx, unreadable body): we cannot tell, so "not now" rather than "no".
  return new VerifierUnavailableError(`cannot fetch the cluster's keys: ${e instanceof Error ? e.message : String(e)}`, "jwks");
}
