/**
 * The broker's Hono app: middleware, the route modules, the OpenAPI document and error handling.
 * It lives apart from the Worker entry point (index.ts) so that tests can read its route table;
 * workerd accepts only handlers and Durable Object classes as exports of the entry module.
 * @module
 */
import { HTTPException } from "hono/http-exception";
import { bodyLimit } from "hono/body-limit";
import { requestId } from "hono/request-id";
import { secureHeaders } from "hono/secure-headers";
import { createRoute } from "@hono/zod-openapi";
import { newApp } from "./http/context.ts";
import { json } from "./http/openapi.ts";
import { completeDocument } from "./http/openapi-document.ts";
import { AnyObject } from "../shared/protocol/schemas.ts";
import { problem } from "../shared/protocol/problem.ts";
import { CONTRACT_VERSION } from "../shared/protocol/wire.ts";
import { sendProblem } from "./http/problem-response.ts";
import { jsonBodyProblem } from "./http/json-body.ts";
import { admin } from "./routes/admin-routes.ts";
import { controller } from "./routes/controller-routes.ts";
import { tickets } from "./routes/ticket-routes.ts";
import { consoleRoutes } from "./console/console-routes.ts";

const MAX_BODY_BYTES = 16 * 1024;
/** Seconds to come back after a transient runtime failure (an object reset or moved). */
export const TRANSIENT_RETRY_AFTER_SECONDS = 1;
/** Seconds to come back when the runtime says the object is overloaded: hammering it makes it worse. */
export const OVERLOADED_RETRY_AFTER_SECONDS = 15;

/**
 * What an exception means, by the properties workerd sets on errors from a Durable Object
 * (never by message text): `overloaded` — the object is overloaded; `retryable` — a transient
 * runtime failure (reset, network); anything else, including every exception thrown by the
 * object's own code (`remote` without `retryable`), is a bug: 500.
 */
export function classifyError(err: unknown): "overloaded" | "transient" | "internal" {
  const e = (typeof err === "object" && err !== null ? err : {}) as { retryable?: unknown; overloaded?: unknown };
  if (e.overloaded === true) return "overloaded";
  if (e.retryable === true) return "transient";
  return "internal";
}

export const app = newApp();

app.use(requestId());
app.use(secureHeaders());
app.use(
  bodyLimit({
    maxSize: MAX_BODY_BYTES,
    onError: (c) => sendProblem(c, problem(413, "body_too_large", `request bodies are at most ${MAX_BODY_BYTES} bytes`)),
  }),
);
// A body must be JSON: anything else is refused before it reaches a validator.
app.use(async (c, next) => {
  const type = c.req.header("content-type");
  const length = c.req.header("content-length");
  const hasBody = (length !== undefined && length !== "0") || c.req.header("transfer-encoding") !== undefined;
  if (hasBody && !/^application\/([\w.-]+\+)?json\s*(;|$)/i.test(type ?? "")) {
    return sendProblem(c, problem(415, "unsupported_media_type", "request bodies must be application/json"));
  }
  if (hasBody) {
    // Decoded strictly here, once: a lenient decoder would turn invalid UTF-8 into U+FFFD and
    // store it. The validators read the same bytes again from Hono's body cache.
    const why = jsonBodyProblem(await c.req.arrayBuffer());
    if (why) return sendProblem(c, problem(400, "malformed_json", why));
  }
  await next();
});

app.openapi(
  createRoute({ method: "get", path: "/", summary: "What this service is", responses: { 200: { description: "Service identification", ...json(AnyObject) } } }),
  (c) => c.json({ service: "etcd-join-broker", protocol: "v1", openapi: "/openapi.json" }, 200),
);
app.openapi(
  createRoute({
    method: "get",
    path: "/healthz",
    summary: "Liveness of the Worker (not of any cluster)",
    responses: { 200: { description: "Alive", ...json(AnyObject) } },
  }),
  (c) => c.json({ ok: true }, 200),
);
app.route("/", tickets);
app.route("/", controller);
app.route("/", admin);
app.route("/", consoleRoutes);

app.openAPIRegistry.registerComponent("securitySchemes", "bearer", { type: "http", scheme: "bearer", description: "Enrollment token or admission token" });
app.openAPIRegistry.registerComponent("securitySchemes", "adminToken", {
  type: "http",
  scheme: "bearer",
  description: "The ADMIN_TOKEN secret; or a read-only credential (`jbr_…`), for GET requests only",
});
let document: object | undefined;
app.get("/openapi.json", (c) => {
  document ??= completeDocument(
    app.getOpenAPI31Document({ openapi: "3.1.0", info: { title: "etcd join broker", version: CONTRACT_VERSION } }) as unknown as Record<string, unknown>,
  );
  return c.json(document);
});

app.notFound((c) => sendProblem(c, problem(404, "not_found", `no route for ${c.req.method} ${new URL(c.req.url).pathname}`)));

app.onError((err, c) => {
  if (err instanceof HTTPException) {
    if (err.res) return err.res;
    if (err.status === 400 && /malformed json/i.test(err.message)) return sendProblem(c, problem(400, "malformed_json", "the request body is not valid JSON"));
    return sendProblem(c, problem(err.status, err.status === 400 ? "invalid_request" : "internal_error", err.message || "request failed"));
  }
  const requestId = c.get("requestId");
  const failure = classifyError(err);
  if (failure === "overloaded" || failure === "transient") {
    console.error(JSON.stringify({ event: `durable_object.${failure}`, name: err.name, message: err.message, requestId }));
    return sendProblem(
      c,
      problem(
        503,
        "unavailable",
        failure === "overloaded" ? "the cluster's queue is overloaded; retry later" : "the cluster's queue is briefly unavailable; retry",
        { correlationId: requestId },
      ),
      failure === "overloaded" ? OVERLOADED_RETRY_AFTER_SECONDS : TRANSIENT_RETRY_AFTER_SECONDS,
    );
  }
  // A bug (in the Worker or the Durable Object's own code): retrying would only repeat it.
  console.error(JSON.stringify({ event: "internal_error", name: err.name, message: err.message, stack: err.stack, requestId }));
  return sendProblem(c, problem(500, "internal_error", `internal error (correlation id ${requestId})`, { correlationId: requestId }));
});
