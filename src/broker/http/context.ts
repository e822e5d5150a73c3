/**
 * What every route module shares: the app type, validation errors as problems, DO outcomes as
 * responses, and bearer credentials.
 * @module
 */
import { OpenAPIHono, type Hook } from "@hono/zod-openapi";
import type { Context, MiddlewareHandler } from "hono";
import { parseBearer } from "../../shared/protocol/bearer.ts";
import { problem, problemCodeForField, type ProblemCode } from "../../shared/protocol/problem.ts";
import { AuthFailureBlocks } from "./auth-limit.ts";
import { sendProblem } from "./problem-response.ts";
import type { Outcome } from "../queue/views.ts";

/** What the admin API's caller may do: set by adminAuth. */
export type AdminAccess = { readOnly: false } | { readOnly: true; id: string; cluster: string | null };

export type AppEnv = { Bindings: Env; Variables: { requestId: string; access: AdminAccess } };

/** Validation failures become 400 problems whose `code` names the field when it is an identifier. */
export const validationHook: Hook<unknown, AppEnv, string, unknown> = (result, c) => {
  if (result.success) return;
  const issues = result.error.issues;
  const first = issues[0];
  const field = first?.code === "unrecognized_keys" ? undefined : String(first?.path?.[first.path.length - 1] ?? "");
  const code = problemCodeForField(field) ?? "invalid_request";
  const detail = issues
    .map((i) => {
      const where = i.path.length ? i.path.join(".") : result.target;
      return i.code === "unrecognized_keys" ? `unknown field(s) in ${result.target}: ${(i as { keys: string[] }).keys.join(", ")}` : `${where}: ${i.message}`;
    })
    .join("; ");
  return sendProblem(c, problem(400, code, detail, { errors: issues.map((i) => ({ path: i.path.join("."), message: i.message, in: result.target })) }));
};

export function newApp(): OpenAPIHono<AppEnv> {
  return new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
}

/**
 * An RPC outcome as HTTP: problems as problem+json, successes with their status, ETag and
 * Retry-After. Typed `any` so that OpenAPI route handlers accept it: the bodies are checked
 * against the OpenAPI schemas by the tests rather than by the compiler.
 */
// biome-ignore lint/suspicious/noExplicitAny: OpenAPI handlers must return the route's typed response; bodies are checked against the schemas by the tests
export function respond<T>(c: Context<AppEnv>, outcome: Outcome<T>): any {
  if (!outcome.ok) return sendProblem(c, problem(outcome.status, outcome.code, outcome.detail, outcome.extra), outcome.retryAfter);
  if (outcome.etag) c.header("etag", outcome.etag);
  if (outcome.retryAfter !== undefined) c.header("retry-after", String(outcome.retryAfter));
  return c.json(outcome.value as object, outcome.status ?? 200);
}

/** The token of an `Authorization: Bearer …` header, or null. */
export function bearerToken(c: Context): string | null {
  return parseBearer(c.req.header("authorization"));
}

export function clientIp(c: Context): string {
  return c.req.header("cf-connecting-ip") ?? c.req.header("x-real-ip") ?? "unknown";
}

/** Which addresses are over the failed-authentication limit, in this isolate. */
const blocked = new AuthFailureBlocks();

function rateLimited(c: Context<AppEnv>, retryAfterSeconds: number): Response {
  return sendProblem(c, problem(429, "rate_limited", "too many failed authentication attempts from this address"), retryAfterSeconds);
}

/**
 * In front of every route that compares a credential: while the client's address is over the
 * failed-authentication limit the answer is 429, whatever the credential, so a right guess is
 * refused like a wrong one. Other addresses are not affected.
 */
export const authLimit: MiddlewareHandler<AppEnv> = async (c, next) => {
  const wait = blocked.retryAfter(clientIp(c), Date.now());
  if (wait > 0) return rateLimited(c, wait);
  await next();
};

/**
 * Counts a failed authentication against the client IP; once over the limit the answer is 429
 * instead of 401, and `authLimit` refuses the address's requests until the period ends.
 */
// biome-ignore lint/suspicious/noExplicitAny: OpenAPI handlers must return the route's typed response; bodies are checked against the schemas by the tests
export async function authFailure(c: Context<AppEnv>, detail: string, code: ProblemCode = "unauthorized"): Promise<any> {
  const limiter = c.env.AUTH_FAILURES;
  if (limiter) {
    const key = clientIp(c);
    const now = Date.now();
    const wait = blocked.retryAfter(key, now);
    if (wait > 0) return rateLimited(c, wait);
    const { success } = await limiter.limit({ key });
    if (!success) return rateLimited(c, blocked.block(key, now));
  }
  c.header("www-authenticate", 'Bearer error="invalid_token"');
  return sendProblem(c, problem(401, code, detail));
}

/** A DO outcome, with 401s counted as failed authentications. */
// biome-ignore lint/suspicious/noExplicitAny: OpenAPI handlers must return the route's typed response; bodies are checked against the schemas by the tests
export async function respondAuthenticated<T>(c: Context<AppEnv>, outcome: Outcome<T>): Promise<any> {
  if (!outcome.ok && outcome.status === 401) return authFailure(c, outcome.detail, outcome.code);
  return respond(c, outcome);
}

export function issuer(c: Context<AppEnv>): string {
  return c.env.ISSUER || new URL(c.req.url).origin;
}

export function queue(c: Context<AppEnv>, cluster: string) {
  return c.env.JOIN_QUEUE.getByName(cluster);
}
