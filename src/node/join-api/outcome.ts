/**
 * The join API's answers: a success body, or an RFC 9457 problem with a stable `code` and, for
 * every "not now", a Retry-After. etcd's refusals are mapped here, in one table.
 * @module
 */
import type { EtcdError } from "../etcd/gateway.ts";
import { fail, type Outcome as SharedOutcome } from "../../shared/protocol/outcome.ts";
import { problem, type Problem, type ProblemCode } from "../../shared/protocol/problem.ts";
import type { AdmissionErrorCode } from "../../shared/verifier/errors.ts";

/** The join API's codes: the request checks it shares with the broker, the verifier's, and etcd's. */
export type JoinApiProblemCode =
  | Extract<
      ProblemCode,
      | "invalid_request"
      | "invalid_node"
      | "invalid_peer_url"
      | "malformed_json"
      | "unsupported_media_type"
      | "body_too_large"
      | "unauthorized"
      | "not_found"
      | "method_not_allowed"
      | "member_not_found"
      | "peer_url_conflict"
      | "internal_error"
    >
  | AdmissionErrorCode
  | "learner_pending"
  | "learner_not_started"
  | "learner_not_in_sync"
  /** The admission's lease ends too soon for an etcd change to be answered within it. */
  | "admission_lease_ending"
  | "too_many_learners"
  | "etcd_unhealthy"
  | "not_enough_started_members"
  | "etcd_unavailable"
  | "etcd_error"
  /** A certificate request that cannot be read, or whose signature does not hold. */
  | "invalid_csr"
  /** A certificate request for a name the admission does not allow. */
  | "csr_name_not_allowed"
  /** Certificate requests sent to a join API that holds no etcd CA. */
  | "certificates_unavailable"
  /** Certificate requests for a member that has started (a running learner, or a voter): none are signed again. */
  | "certificates_not_reissued";

export type JoinApiProblem = Problem<JoinApiProblemCode>;

export type Outcome<T> = SharedOutcome<T, JoinApiProblemCode>;

export function joinProblem(status: number, code: JoinApiProblemCode, detail: string, extra: Record<string, unknown> = {}): JoinApiProblem {
  return problem(status, code, detail, extra);
}

export function refuse<T>(status: number, code: JoinApiProblemCode, detail: string, retryAfter?: number): Outcome<T> {
  return fail(status, code, detail, retryAfter);
}

/** Seconds a caller should wait before asking again, per etcd refusal. */
export const RETRY_AFTER = {
  /**
   * etcd needs the leader connected to every voter for 5 s after the last change; how much of
   * that window is left is unknown here, and a second too early costs one cheap refusal.
   */
  unhealthy: 1,
  /** etcd has no room for another learner: a pending one must start and be promoted first. */
  learnerPending: 2,
  tooManyLearners: 10,
  learnerNotStarted: 2,
  learnerNotInSync: 1,
  unavailable: 2,
  /** The node's heartbeat extends the lease meanwhile (it renews a third of the way in). */
  leaseEnding: 1,
  /** etcd refused the ID it made for an add, that of a member removed within this second. */
  idRemoved: 1,
  unknown: 5,
} as const;

/**
 * An etcd refusal as an answer. Everything a caller could retry is a 503 with Retry-After,
 * including errors this table does not know: retrying them is bounded by the caller and
 * harmless, whereas a 500 would tell it to give up.
 */
export function fromEtcdError<T>(error: EtcdError): Outcome<T> {
  const detail = `etcd: ${error.message}`;
  switch (error.kind) {
    case "too_many_learners":
      return refuse(
        503,
        "too_many_learners",
        `${detail} (etcd's learner limit is reached: one before etcd 3.6, --max-learners from 3.6; a pending learner must be promoted or removed first)`,
        RETRY_AFTER.tooManyLearners,
      );
    case "unhealthy_cluster":
      return refuse(503, "etcd_unhealthy", `${detail} (the leader must reach every voter for 5 s before a membership change)`, RETRY_AFTER.unhealthy);
    case "not_enough_started":
      return refuse(503, "not_enough_started_members", detail, RETRY_AFTER.unhealthy);
    case "learner_not_ready":
      return refuse(503, "learner_not_in_sync", detail, RETRY_AFTER.learnerNotInSync);
    case "unavailable":
      return refuse(503, "etcd_unavailable", detail, RETRY_AFTER.unavailable);
    case "member_not_found":
      return refuse(404, "member_not_found", detail);
    case "peer_url_exists":
    case "member_id_exists":
      return refuse(409, "peer_url_conflict", detail);
    default:
      return refuse(503, "etcd_error", detail, RETRY_AFTER.unknown);
  }
}
