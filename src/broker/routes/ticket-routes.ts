/**
 * Node-facing routes: tickets, authenticated by enrollment or admission tokens (checked by the
 * cluster's Durable Object).
 * @module
 */
import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { Outcome } from "../queue/views.ts";
import { authFailure, authLimit, bearerToken, newApp, queue, respondAuthenticated, type AppEnv } from "../http/context.ts";
import { json, problemDoc } from "../http/openapi.ts";
import { canonicalPeerUrl } from "../../shared/protocol/identifiers.ts";
import {
  ClusterParams,
  CompleteRequest,
  StartedRequest,
  StuckRequest,
  TicketParams,
  TicketRequest,
  TicketView,
  WaitQuery,
} from "../../shared/protocol/schemas.ts";

const problems = {
  400: problemDoc("Invalid input"),
  401: problemDoc("Missing or unknown token"),
  403: problemDoc("Token does not grant this"),
  404: problemDoc("Unknown ticket"),
};
const bearer = [{ bearer: [] }];

/** A ticket route: authenticated by a bearer token, and answering the problems every ticket route may. */
function ticketRoute<R extends Omit<RouteConfig, "security">>(route: R) {
  return createRoute({ ...route, security: bearer, responses: { ...problems, ...route.responses } });
}

/**
 * Answers with the outcome of `call`, given the request's bearer token; without a token, a
 * counted authentication failure saying `missing`.
 */
// biome-ignore lint/suspicious/noExplicitAny: OpenAPI handlers must return the route's typed response; bodies are checked against the schemas by the tests
async function withBearer<T>(c: Context<AppEnv>, missing: string, call: (token: string) => Promise<Outcome<T>>): Promise<any> {
  const token = bearerToken(c);
  if (!token) return authFailure(c, missing);
  return respondAuthenticated(c, await call(token));
}

export const tickets = newApp();
// Before any token is compared (here or in the cluster's object): a throttled address is refused.
tickets.use("/v1/clusters/:cluster/tickets", authLimit);
tickets.use("/v1/clusters/:cluster/tickets/*", authLimit);
tickets
  .openapi(
    ticketRoute({
      method: "post",
      path: "/v1/clusters/{cluster}/tickets",
      summary: "Request (or find again) this node's ticket",
      request: { params: ClusterParams, body: { required: true, ...json(TicketRequest) } },
      responses: {
        200: { description: "The node's existing ticket", ...json(TicketView) },
        201: { description: "A new ticket, admitted at once", ...json(TicketView) },
        202: { description: "Queued; ask again after Retry-After", ...json(TicketView) },
        403: problemDoc("wrong_token_kind, enrollment_token_exhausted, or outside_token_scope: the node or its peer host is outside the token's scope"),
        404: problemDoc("unknown_cluster: no cluster of that name on this broker (a wrong cluster name, not a wrong token)"),
        409: problemDoc("peer_url_conflict, or ticket_held: the node's live ticket belongs to another enrollment token that is still valid"),
        503: problemDoc(
          "queue_full, or restored_awaiting_admin: the broker's state was restored from an earlier point and this node would bootstrap; an admin must decide first (adopt, or bootstrap/allow)",
        ),
      },
    }),
    async (c) => {
      const { cluster } = c.req.valid("param");
      const { node, peerURL, exclusiveUntilStarted } = c.req.valid("json");
      return withBearer(c, "an enrollment token is required (Authorization: Bearer …)", (token) =>
        queue(c, cluster).requestTicket({
          cluster,
          bearer: token,
          node,
          peerURL: canonicalPeerUrl(peerURL),
          exclusiveUntilStarted: exclusiveUntilStarted ?? false,
        }),
      );
    },
  )
  .openapi(
    ticketRoute({
      method: "get",
      path: "/v1/clusters/{cluster}/tickets/{ticket}",
      summary: "Read a ticket; with ?wait=S, hold until it changes (long poll)",
      request: { params: TicketParams, query: WaitQuery },
      responses: {
        200: { description: "The ticket view", ...json(TicketView) },
        202: { description: "Still queued", ...json(TicketView) },
        410: problemDoc("admission_inactive: the admission token is no longer the ticket's current, active admission (`reason` says why)"),
      },
    }),
    async (c) => {
      const { cluster, ticket } = c.req.valid("param");
      const { wait } = c.req.valid("query");
      return withBearer(c, "an enrollment or admission token is required", (token) =>
        queue(c, cluster).getTicket({ bearer: token, ticket, waitSeconds: wait ?? 0, ifNoneMatch: c.req.header("if-none-match") ?? null }),
      );
    },
  )
  .openapi(
    ticketRoute({
      method: "post",
      path: "/v1/clusters/{cluster}/tickets/{ticket}/heartbeat",
      summary: "Extend the admitted ticket's lease",
      request: { params: TicketParams },
      responses: {
        200: { description: "The ticket view with the new lease", ...json(TicketView) },
        409: problemDoc("not_admitted"),
        410: problemDoc("admission_inactive"),
      },
    }),
    async (c) => {
      const { cluster, ticket } = c.req.valid("param");
      return withBearer(c, "the ticket's admission token is required", (token) => queue(c, cluster).heartbeat({ bearer: token, ticket }));
    },
  )
  .openapi(
    ticketRoute({
      method: "post",
      path: "/v1/clusters/{cluster}/tickets/{ticket}/started",
      summary: "Report the node's etcd member started (its etcd runs as a member of the cluster); under the start rule the next node may then be admitted",
      request: { params: TicketParams, body: { required: true, ...json(StartedRequest) } },
      responses: {
        200: { description: "The admitted ticket, with memberStartedAt", ...json(TicketView) },
        409: problemDoc("not_admitted or member_id_conflict"),
        410: problemDoc("admission_inactive"),
      },
    }),
    async (c) => {
      const { cluster, ticket } = c.req.valid("param");
      const { memberID } = c.req.valid("json");
      return withBearer(c, "the ticket's admission token is required", (token) => queue(c, cluster).memberStarted({ bearer: token, ticket, memberID }));
    },
  )
  .openapi(
    ticketRoute({
      method: "post",
      path: "/v1/clusters/{cluster}/tickets/{ticket}/stuck",
      summary:
        "Give up the admission leaving a member in etcd the node could not remove (a cluster without quorum, say): the ticket is abandoned and the cluster paused until an operator removes the member and resumes it",
      request: { params: TicketParams, body: { required: true, ...json(StuckRequest) } },
      responses: {
        200: { description: "The abandoned ticket; the cluster is paused and needs an operator", ...json(TicketView) },
        409: problemDoc("not_admitted"),
        410: problemDoc("admission_inactive"),
      },
    }),
    async (c) => {
      const { cluster, ticket } = c.req.valid("param");
      const { memberID, detail } = c.req.valid("json");
      return withBearer(c, "the ticket's admission token is required", (token) => queue(c, cluster).memberStuck({ bearer: token, ticket, memberID, detail }));
    },
  )
  .openapi(
    ticketRoute({
      method: "post",
      path: "/v1/clusters/{cluster}/tickets/{ticket}/complete",
      summary: "Report the node a started, promoted voter; frees its slot",
      request: { params: TicketParams, body: { required: true, ...json(CompleteRequest) } },
      responses: {
        200: { description: "The joined ticket", ...json(TicketView) },
        409: problemDoc("not_admitted or member_id_conflict"),
        410: problemDoc("admission_inactive"),
      },
    }),
    async (c) => {
      const { cluster, ticket } = c.req.valid("param");
      const { memberID } = c.req.valid("json");
      return withBearer(c, "the ticket's admission token is required", (token) => queue(c, cluster).complete({ bearer: token, ticket, memberID }));
    },
  )
  .openapi(
    ticketRoute({
      method: "delete",
      path: "/v1/clusters/{cluster}/tickets/{ticket}",
      summary: "Abandon the ticket; frees its slot",
      request: { params: TicketParams },
      responses: {
        200: { description: "The abandoned ticket", ...json(TicketView) },
        410: problemDoc("admission_inactive: the admission token is no longer the ticket's current, active admission (`reason` says why)"),
      },
    }),
    async (c) => {
      const { cluster, ticket } = c.req.valid("param");
      return withBearer(c, "an enrollment or admission token is required", (token) => queue(c, cluster).abandon({ bearer: token, ticket }));
    },
  );
