/**
 * RFC 9457 problem details with the stable `code` every client can switch on.
 * @module
 */

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
  | "restored_awaiting_admin"
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

/** The code of a 400 whose first failing field is an identifier, so a client can tell which one is wrong. */
const FIELD_CODES = { cluster: "invalid_cluster", node: "invalid_node", peerURL: "invalid_peer_url", peerAddress: "invalid_peer_url" } as const;

export function problemCodeForField(field: string | undefined): (typeof FIELD_CODES)[keyof typeof FIELD_CODES] | undefined {
  return field !== undefined && Object.hasOwn(FIELD_CODES, field) ? FIELD_CODES[field as keyof typeof FIELD_CODES] : undefined;
}
