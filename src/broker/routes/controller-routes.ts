/**
 * Controller-facing routes, with no credential: the cluster's public keys, its revocation list
 * and token introspection. They never create a cluster.
 * @module
 */
import { createRoute } from "@hono/zod-openapi";
import { newApp, queue, respond } from "../http/context.ts";
import { json, problemDoc } from "../http/openapi.ts";
import { ClusterParams, IntrospectRequest, IntrospectResponse, Jwks, Revocations } from "../../shared/protocol/schemas.ts";

export const controller = newApp()
  .openapi(
    createRoute({
      method: "get",
      path: "/v1/clusters/{cluster}/jwks.json",
      summary: "The cluster's public signing keys (current and not yet expired retired ones)",
      request: { params: ClusterParams },
      responses: { 200: { description: "JWKS", ...json(Jwks) }, 404: problemDoc("unknown_cluster") },
    }),
    async (c) => {
      const outcome = await queue(c, c.req.valid("param").cluster).jwks();
      // Short: verifiers refetch on an unknown kid anyway, and rotation should reach them soon.
      if (outcome.ok) c.header("cache-control", "public, max-age=60");
      return respond(c, outcome);
    },
  )
  .openapi(
    createRoute({
      method: "get",
      path: "/v1/clusters/{cluster}/revocations",
      summary: "Admission tokens that are no longer active but not yet expired",
      request: { params: ClusterParams },
      responses: {
        200: { description: "Revocation list", ...json(Revocations) },
        304: { description: "Unchanged since If-None-Match" },
        404: problemDoc("unknown_cluster"),
      },
    }),
    async (c) => {
      const outcome = await queue(c, c.req.valid("param").cluster).revocations();
      c.header("cache-control", "no-cache");
      if (outcome.ok && outcome.etag && c.req.header("if-none-match") === outcome.etag) {
        c.header("etag", outcome.etag);
        return c.body(null, 304);
      }
      return respond(c, outcome);
    },
  )
  .openapi(
    createRoute({
      method: "post",
      path: "/v1/clusters/{cluster}/admissions/introspect",
      summary: "Is this admission token active now?",
      request: { params: ClusterParams, body: { required: true, ...json(IntrospectRequest) } },
      responses: { 200: { description: "Active with claims, or inactive with a reason", ...json(IntrospectResponse) }, 400: problemDoc("Invalid input") },
    }),
    async (c) => {
      const { cluster } = c.req.valid("param");
      const result = await queue(c, cluster).introspect(c.req.valid("json").token);
      c.header("cache-control", "no-store");
      return c.json(result, 200);
    },
  );
