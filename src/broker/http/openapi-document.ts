/**
 * The served OpenAPI document: what the route declarations generate, completed with what is true
 * of every route because of the shared middleware and the Durable Object behind it: body
 * problems (400 `malformed_json`, 413, 415) on every operation, 401 and 429 (with `Retry-After`)
 * wherever a credential is checked, 500 and 503 (with `Retry-After`) wherever a cluster's
 * object answers, an `operationId` per operation and `security: []` on the public ones.
 * Completing it here, in one place, keeps the route modules short and the document honest when
 * a route is added.
 * @module
 */
type Json = Record<string, unknown>;

/** Stable operation ids (clients generate method names from them); others are derived. */
const OPERATION_IDS: Record<string, string> = {
  "GET /": "getService",
  "GET /healthz": "getHealth",
  "POST /v1/clusters/{cluster}/tickets": "requestTicket",
  "GET /v1/clusters/{cluster}/tickets/{ticket}": "getTicket",
  "DELETE /v1/clusters/{cluster}/tickets/{ticket}": "abandonTicket",
  "POST /v1/clusters/{cluster}/tickets/{ticket}/heartbeat": "heartbeatTicket",
  "POST /v1/clusters/{cluster}/tickets/{ticket}/started": "reportMemberStarted",
  "POST /v1/clusters/{cluster}/tickets/{ticket}/stuck": "reportMemberStuck",
  "POST /v1/clusters/{cluster}/tickets/{ticket}/complete": "completeTicket",
  "GET /v1/clusters/{cluster}/jwks.json": "getJwks",
  "GET /v1/clusters/{cluster}/revocations": "getRevocations",
  "POST /v1/clusters/{cluster}/admissions/introspect": "introspectAdmission",
  "POST /v1/admin/clusters/{cluster}/enrollment-tokens": "createEnrollmentToken",
  "GET /v1/admin/clusters/{cluster}/enrollment-tokens": "listEnrollmentTokens",
  "DELETE /v1/admin/clusters/{cluster}/enrollment-tokens/{id}": "revokeEnrollmentToken",
  "GET /v1/admin/clusters/{cluster}": "getClusterStatus",
  "GET /v1/admin/clusters/{cluster}/tickets": "listTickets",
  "POST /v1/admin/clusters/{cluster}/admissions/{jti}/revoke": "revokeAdmission",
  "POST /v1/admin/clusters/{cluster}/pause": "pauseCluster",
  "POST /v1/admin/clusters/{cluster}/resume": "resumeCluster",
  "PUT /v1/admin/clusters/{cluster}/policy": "setPolicy",
  "POST /v1/admin/clusters/{cluster}/keys/rotate": "rotateKeys",
  "POST /v1/admin/clusters/{cluster}/adopt": "adoptCluster",
  "DELETE /v1/admin/clusters/{cluster}/members/{node}": "forgetMember",
  "POST /v1/admin/clusters/{cluster}/bootstrap": "reassignBootstrap",
  "POST /v1/admin/clusters/{cluster}/restored": "markClusterRestored",
  "POST /v1/admin/clusters/{cluster}/bootstrap/allow": "allowBootstrap",
  "GET /v1/admin/clusters/{cluster}/metrics": "getMetrics",
  "GET /v1/admin/clusters/{cluster}/audit": "getAudit",
};

const METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"];
const RETRY_AFTER = { $ref: "#/components/headers/RetryAfter" };

/** `post /v1/admin/clusters/{cluster}/keys/rotate` → `postV1AdminClustersClusterKeysRotate` */
function derivedOperationId(method: string, path: string): string {
  const words = path.split(/[^A-Za-z0-9]+/).filter(Boolean);
  return method + words.map((w) => w[0].toUpperCase() + w.slice(1)).join("");
}

function problemResponse(description: string, retryAfter = false): Json {
  return {
    description,
    ...(retryAfter ? { headers: { "Retry-After": RETRY_AFTER } } : {}),
    content: { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } },
  };
}

/** Completes a generated OpenAPI 3.1 document in place and returns it. */
export function completeDocument(doc: Json): Json {
  const info = (doc.info ??= {}) as Json;
  info.license ??= { name: "Apache-2.0", identifier: "Apache-2.0" };
  info.description ??=
    "Serializes etcd joins: one FIFO join queue per cluster, short-lived signed admission tokens. Every 4xx/5xx body is application/problem+json (RFC 9457) with a stable `code`.";
  doc.servers ??= [{ url: "/", description: "this broker" }];
  const components = (doc.components ??= {}) as Json;
  const headers = (components.headers ??= {}) as Json;
  headers.RetryAfter = { description: "Seconds to wait before asking again", schema: { type: "integer", minimum: 1 } };

  for (const [path, item] of Object.entries((doc.paths ?? {}) as Record<string, Json>)) {
    for (const method of METHODS) {
      const op = item[method] as Json | undefined;
      if (!op) continue;
      const key = `${method.toUpperCase()} ${path}`;
      op.operationId ??= OPERATION_IDS[key] ?? derivedOperationId(method, path);
      op.security ??= [];
      const responses = (op.responses ??= {}) as Record<string, Json>;
      const add = (status: string, response: Json) => (responses[status] ??= response);
      // The shared middleware refuses a body that is not a small UTF-8 JSON document, on any route.
      add("400", problemResponse("Invalid input: malformed_json, or a parameter or field that fails validation"));
      add("413", problemResponse("body_too_large: request bodies are at most 16 KiB"));
      add("415", problemResponse("unsupported_media_type: request bodies must be application/json"));
      if (((op.security ?? []) as unknown[]).length > 0) {
        add("401", problemResponse("unauthorized: missing, unknown or invalid credential"));
        add("429", problemResponse("rate_limited: too many failed authentications from this address", true));
      }
      if (path.startsWith("/v1/")) {
        add("500", problemResponse("internal_error: an unexpected failure of the broker (not worth retrying at once)"));
        add("503", problemResponse("Not now: the cluster's queue is unavailable or full; ask again after Retry-After", true));
      }
      for (const status of ["202", "429", "503"]) {
        const r = responses[status];
        if (r) r.headers = { ...(r.headers as Json | undefined), "Retry-After": RETRY_AFTER };
      }
    }
  }
  return doc;
}
