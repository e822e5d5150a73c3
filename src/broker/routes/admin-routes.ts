/**
 * Admin routes, behind `Authorization: Bearer <ADMIN_TOKEN>` or a read-only credential, which
 * may only read (admin-auth.ts). Failed attempts count against the client's IP.
 * @module
 */
import { createRoute, z } from "@hono/zod-openapi";
import { authLimit, issuer, newApp, queue, respond } from "../http/context.ts";
import { json, problemDoc } from "../http/openapi.ts";
import {
  AdoptRequest,
  AnyObject,
  AuditQuery,
  BootstrapRequest,
  ClusterParams,
  EnrollmentTokenParams,
  EnrollmentTokenRequest,
  JtiParams,
  NodeParams,
  PolicyRequest,
  RestoreDecisionRequest,
  RevokeRequest,
  TicketListQuery,
} from "../../shared/protocol/schemas.ts";
import { canonicalPeerUrl } from "../../shared/protocol/identifiers.ts";
import type { Outcome } from "../queue/views.ts";
import { CLUSTER_INDEX_NAME, type IndexedCluster } from "../queue/cluster-index.ts";
import { adminAuth, readOnlyGate } from "../http/admin-auth.ts";
import { credentialRoutes } from "./credential-routes.ts";

const common = {
  400: problemDoc("Invalid input"),
  401: problemDoc("Missing or wrong admin token"),
  403: problemDoc("A read-only credential: writes, and other clusters' reads, are refused"),
  404: problemDoc("Unknown cluster or object"),
  429: problemDoc("Too many failed authentications"),
};
const ok = (description: string, status: 200 | 201 = 200) => ({ [status]: { description, ...json(AnyObject) }, ...common });
const conflict = { 409: problemDoc("Refused in the cluster's current state") };
const security = [{ adminToken: [] }];
const base = "/v1/admin/clusters/{cluster}";

const route = <P extends string, M extends "get" | "post" | "put" | "delete", R extends object = object>(
  method: M,
  path: P,
  summary: string,
  request?: R,
  options: { status?: 200 | 201; responses?: object } = {},
) =>
  createRoute({
    method,
    path: `${base}${path}` as `${typeof base}${P}`,
    summary,
    security,
    request: { params: ClusterParams, ...(request as R) },
    responses: { ...ok(summary, options.status), ...options.responses },
  });

export const admin = newApp();
admin.use("/v1/admin/*", authLimit, adminAuth, readOnlyGate);

admin.openapi(
  createRoute({
    method: "get",
    path: "/v1/admin/clusters",
    summary: "The clusters on this broker, by name",
    security,
    responses: { 200: { description: "The clusters on this broker, by name", ...json(AnyObject) }, 401: common[401], 429: common[429] },
  }),
  async (c) => {
    const outcome = (await c.env.JOIN_QUEUE.getByName(CLUSTER_INDEX_NAME).indexList()) as Outcome<{ clusters: IndexedCluster[] }>;
    const access = c.get("access");
    // A credential for one cluster sees only that one.
    if (!outcome.ok || !access.readOnly || access.cluster === null) return respond(c, outcome);
    return c.json({ clusters: outcome.value.clusters.filter((k) => k.name === access.cluster) }, 200);
  },
);

credentialRoutes(admin, { security, common });

admin
  .openapi(
    route(
      "post",
      "/enrollment-tokens",
      "Create an enrollment token (shown once)",
      { body: { required: false, ...json(EnrollmentTokenRequest) } },
      { status: 201 },
    ),
    async (c) => {
      const { cluster } = c.req.valid("param");
      const body = (c.req.valid("json") ?? {}) as z.infer<typeof EnrollmentTokenRequest>;
      return respond(c, await queue(c, cluster).createEnrollmentToken(cluster, issuer(c), body));
    },
  )
  .openapi(route("get", "/enrollment-tokens", "List enrollment tokens (no secrets)"), async (c) => {
    return respond(c, await queue(c, c.req.valid("param").cluster).listEnrollmentTokens());
  })
  .openapi(
    createRoute({
      method: "delete",
      path: `${base}/enrollment-tokens/{id}`,
      summary: "Revoke an enrollment token",
      security,
      request: { params: EnrollmentTokenParams },
      responses: ok("The revoked token"),
    }),
    async (c) => {
      const { cluster, id } = c.req.valid("param");
      return respond(c, await queue(c, cluster).revokeEnrollmentToken(id));
    },
  )
  .openapi(route("get", "", "Cluster status: bootstrap, pause, policy, queue, in flight, members"), async (c) => {
    return respond(c, await queue(c, c.req.valid("param").cluster).status());
  })
  .openapi(route("get", "/tickets", "List tickets, optionally by state", { query: TicketListQuery }), async (c) => {
    const { state, limit, after } = c.req.valid("query");
    return respond(c, await queue(c, c.req.valid("param").cluster).listTickets({ state: state ?? null, limit: limit ?? 100, after: after ?? 0 }));
  })
  .openapi(
    createRoute({
      method: "post",
      path: `${base}/admissions/{jti}/revoke`,
      summary: "Revoke an admission token now",
      security,
      request: { params: JtiParams, body: { required: true, ...json(RevokeRequest) } },
      responses: ok("The revoked admission"),
    }),
    async (c) => {
      const { cluster, jti } = c.req.valid("param");
      return respond(c, await queue(c, cluster).revokeAdmission({ jti, reason: c.req.valid("json").reason }));
    },
  )
  .openapi(route("post", "/pause", "Pause admissions"), async (c) => {
    const { cluster } = c.req.valid("param");
    return respond(c, await queue(c, cluster).setPaused(cluster, issuer(c), true));
  })
  .openapi(route("post", "/resume", "Resume admissions"), async (c) => {
    const { cluster } = c.req.valid("param");
    return respond(c, await queue(c, cluster).setPaused(cluster, issuer(c), false));
  })
  .openapi(route("get", "/policy", "The queue policy"), async (c) => {
    const outcome = (await queue(c, c.req.valid("param").cluster).status()) as Outcome<{ policy?: object }>;
    if (!outcome.ok) return respond(c, outcome);
    return c.json(outcome.value.policy ?? {}, 200);
  })
  .openapi(
    route("put", "/policy", "Change the queue policy (fields not given keep their value)", { body: { required: true, ...json(PolicyRequest) } }),
    async (c) => {
      const { cluster } = c.req.valid("param");
      return respond(c, await queue(c, cluster).setPolicy(cluster, issuer(c), c.req.valid("json")));
    },
  )
  .openapi(route("post", "/keys/rotate", "Rotate the cluster's signing key"), async (c) => {
    return respond(c, await queue(c, c.req.valid("param").cluster).rotateKeys());
  })
  .openapi(
    route(
      "post",
      "/adopt",
      "Declare an existing cluster and its members: no bootstrap, ever",
      { body: { required: true, ...json(AdoptRequest) } },
      { responses: conflict },
    ),
    async (c) => {
      const { cluster } = c.req.valid("param");
      const members = c.req.valid("json").members.map((m) => ({ node: m.node, peerURL: canonicalPeerUrl(m.peerURL) }));
      return respond(c, await queue(c, cluster).adopt(cluster, issuer(c), members));
    },
  )
  .openapi(
    createRoute({
      method: "delete",
      path: `${base}/members/{node}`,
      summary: "Forget a member so that it may join again",
      security,
      request: { params: NodeParams },
      responses: ok("The forgotten member"),
    }),
    async (c) => {
      const { cluster, node } = c.req.valid("param");
      return respond(c, await queue(c, cluster).forgetMember(node));
    },
  )
  .openapi(
    route(
      "post",
      "/bootstrap",
      "Hand the bootstrap ticket to another node (explicit; never by timeout)",
      { body: { required: true, ...json(BootstrapRequest) } },
      { responses: conflict },
    ),
    async (c) => {
      const { cluster } = c.req.valid("param");
      return respond(c, await queue(c, cluster).reassignBootstrap(c.req.valid("json")));
    },
  )
  .openapi(
    route("post", "/restored", "Mark the cluster's state restored from an earlier point: no bootstrap until an admin decides", {
      body: { required: true, ...json(RestoreDecisionRequest) },
    }),
    async (c) => respond(c, await queue(c, c.req.valid("param").cluster).markRestored(c.req.valid("json"))),
  )
  .openapi(
    route(
      "post",
      "/bootstrap/allow",
      "After a restore: the cluster never formed, its bootstrap may go ahead",
      { body: { required: true, ...json(RestoreDecisionRequest) } },
      { responses: conflict },
    ),
    async (c) => respond(c, await queue(c, c.req.valid("param").cluster).allowBootstrap(c.req.valid("json"))),
  )
  .openapi(
    createRoute({
      method: "get",
      path: `${base}/metrics`,
      summary: "Queue metrics in Prometheus text format",
      security,
      request: { params: ClusterParams },
      responses: { 200: { description: "Prometheus text exposition 0.0.4", content: { "text/plain": { schema: z.string() } } }, ...common },
    }),
    async (c) => {
      const outcome = await queue(c, c.req.valid("param").cluster).metrics();
      if (!outcome.ok) return respond(c, outcome);
      return c.text(outcome.value, 200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
    },
  )
  .openapi(route("get", "/audit", "The append-only audit log", { query: AuditQuery }), async (c) => {
    const { after, limit, wait } = c.req.valid("query");
    return respond(c, await queue(c, c.req.valid("param").cluster).audit({ after: after ?? 0, limit: limit ?? 100, waitSeconds: wait ?? 0 }));
  });
