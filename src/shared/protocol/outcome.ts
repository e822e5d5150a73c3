/**
 * The one `Outcome` of the project: what a command (the broker's Durable Object, the join API's
 * member operations) answers with. Expected refusals are returned, not thrown; the HTTP layer
 * turns a `Failure` into problem+json (`problemOf`) with the same `code`.
 * @module
 */
import { problem, type Problem, type ProblemCode } from "./problem.ts";

/** An expected refusal, with the stable `code` its problem+json will carry. */
export interface Failure<Code extends string = ProblemCode> {
  ok: false;
  status: number;
  code: Code;
  detail: string;
  /** Seconds, sent as `Retry-After`. */
  retryAfter?: number;
  /** Extension members of the problem (RFC 9457), e.g. the `reason` of a 410. */
  extra?: Record<string, unknown>;
}

export interface Success<T> {
  ok: true;
  value: T;
  /** The HTTP status of the answer when it is not 200. */
  status?: 200 | 201 | 202;
  etag?: string;
  retryAfter?: number;
}

export type Outcome<T, Code extends string = ProblemCode> = Success<T> | Failure<Code>;

export function fail<Code extends string = ProblemCode>(
  status: number,
  code: Code,
  detail: string,
  retryAfter?: number,
  extra?: Record<string, unknown>,
): Failure<Code> {
  return { ok: false, status, code, detail, ...(retryAfter !== undefined ? { retryAfter } : {}), ...(extra ? { extra } : {}) };
}

/** The problem+json body of a failure. */
export function problemOf<Code extends string>(f: Failure<Code>): Problem<Code> {
  return problem(f.status, f.code, f.detail, f.extra);
}
