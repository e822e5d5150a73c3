/**
 * Why an admission token was refused, as typed errors that carry their HTTP status: 401 the
 * token is not a valid admission token, 403 it is valid but for another node, peer or role, 410
 * it was valid and no longer is, 503 the verifier could not decide now (the broker is away).
 * @module
 */

export type AdmissionErrorCode =
  /** Malformed, wrong algorithm, bad signature, wrong `typ`/`iss`/`aud`/cluster, missing claims. */
  | "invalid_token"
  /** No key in the cluster's JWKS has this `kid` (even after refetching it). */
  | "unknown_key"
  /** `nbf` (or `iat`) is in the future beyond the clock tolerance. */
  | "token_not_yet_valid"
  | "wrong_node"
  | "wrong_peer_url"
  | "wrong_role"
  | "token_expired"
  | "admission_revoked"
  | "admission_completed"
  /** Abandoned, or superseded by a newer admission of the same ticket. */
  | "admission_inactive"
  /** The broker could not be asked and no usable revocation list was at hand. */
  | "broker_unavailable";

export type AdmissionErrorStatus = 401 | 403 | 410 | 503;

export class AdmissionError extends Error {
  override readonly name: string = "AdmissionError";
  constructor(
    readonly status: AdmissionErrorStatus,
    readonly code: AdmissionErrorCode,
    message: string,
    /** A finer, log-friendly reason (a jose error code, an introspection reason, a claim name). */
    readonly reason?: string,
  ) {
    super(message);
  }
}

/** 401: not a valid admission token for this cluster. */
export class InvalidAdmissionError extends AdmissionError {
  override readonly name = "InvalidAdmissionError";
  constructor(code: "invalid_token" | "unknown_key" | "token_not_yet_valid", message: string, reason?: string) {
    super(401, code, message, reason);
  }
}

/** 403: a valid token, but bound to another node, peer URL or role. */
export class ForbiddenAdmissionError extends AdmissionError {
  override readonly name = "ForbiddenAdmissionError";
  constructor(code: "wrong_node" | "wrong_peer_url" | "wrong_role", message: string, reason?: string) {
    super(403, code, message, reason);
  }
}

/** 410: the admission was real and has ended (revoked, completed, expired, abandoned, superseded). */
export class InactiveAdmissionError extends AdmissionError {
  override readonly name = "InactiveAdmissionError";
  constructor(code: "token_expired" | "admission_revoked" | "admission_completed" | "admission_inactive", message: string, reason?: string) {
    super(410, code, message, reason);
  }
}

/** 503: cannot decide now; ask again later. */
export class VerifierUnavailableError extends AdmissionError {
  override readonly name = "VerifierUnavailableError";
  constructor(message: string, reason?: string) {
    super(503, "broker_unavailable", message, reason);
  }
}
