/**
 * RFC 9457 problem details with the stable `code` every client can switch on.
 * @module
 */
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";

export type ProblemCode =
  | "invalid_request"
  | "invalid_cluster"
  | "invalid_node"
  | "invalid_peer_url"
  | "malformed_json"
  | "unsupported_media_type"
  | "body_too_large"
  | "unauthorized"
  | "rate_limited"
  | "forbidden"
  | "wrong_token_kind"
  | "enrollment_token_exhausted"
  | "not_found"
  | "method_not_allowed"
  | "unknown_cluster"
  | "ticket_not_found"
  | "peer_url_conflict"
  | "ticket_held"
  | "outside_token_scope"
  | "queue_full"
  | "not_admitted"
  | "admission_inactive"
  | "admission_not_found"
  | "enrollment_token_not_found"
  | "member_not_found"
  | "bootstrap_in_progress"
  | "already_bootstrapped"
  | "node_has_live_ticket"
  | "member_id_conflict"
  | "unavailable"
  | "internal_error";

export interface Problem<Code extends string = ProblemCode> {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: Code;
  [extension: string]: unknown;
}

const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  410: "Gone",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable",
};

export function problem<Code extends string = ProblemCode>(status: number, code: Code, detail: string, extra: Record<string, unknown> = {}): Problem<Code> {
  return {
    type: `https://etcd-join-broker.dev/problems/${code.replaceAll("_", "-")}`,
    title: TITLES[status] ?? "Error",
    status,
    detail,
    code,
    ...extra,
  };
}

export function problemResponse(p: Problem<string>, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(p), {
    status: p.status,
    headers: { "content-type": "application/problem+json", ...headers },
  });
}

/** Answers with a problem; 429 and 503 always carry Retry-After. */
export function sendProblem(c: Context, p: Problem<string>, retryAfterSeconds?: number): Response {
  const headers: Record<string, string> = {};
  if (retryAfterSeconds !== undefined || p.status === 429 || p.status === 503) {
    headers["retry-after"] = String(Math.max(1, Math.ceil(retryAfterSeconds ?? 1)));
  }
  c.header("content-type", "application/problem+json");
  for (const [k, v] of Object.entries(headers)) c.header(k, v);
  return c.body(JSON.stringify(p), p.status as ContentfulStatusCode);
}
