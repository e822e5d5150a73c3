/**
 * Problems (src/shared/protocol/problem.ts) as HTTP responses of the Worker.
 * @module
 */
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { Problem } from "../../shared/protocol/problem.ts";

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
