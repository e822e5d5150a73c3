/**
 * What a Worker needs, self-hosted on workerd, that Cloudflare provides: the `AUTH_FAILURES`
 * rate-limiting binding (here a local limiter with the same rule), a client address that
 * cannot be forged (see client-ip.ts), and a `Date` header on every response (workerd sends
 * none; agents measure their lease on the broker's clock by it, so that a node whose clock is
 * minutes off keeps its admission). Wraps any handler: the broker's, or the bench Worker's.
 * @module
 */
import { withTrustedClientIp } from "./client-ip.ts";
import { AUTH_FAILURE_LIMIT, FixedWindowLimiter } from "./rate-limit.ts";

type SelfHostedEnv = Env & { CLIENT_IP_HEADER?: string };

export function selfHosted(handler: { fetch: NonNullable<ExportedHandler<Env>["fetch"]> }, now: () => number = Date.now): ExportedHandler<SelfHostedEnv> {
  const authFailures = new FixedWindowLimiter(AUTH_FAILURE_LIMIT.limit, AUTH_FAILURE_LIMIT.period, now);
  const withLimiter = new WeakMap<Env, Env>();
  /** `env` with AUTH_FAILURES added; the other bindings are read through the prototype. */
  const selfHostedEnv = (env: Env): Env => {
    let wrapped = withLimiter.get(env);
    if (!wrapped) {
      wrapped = Object.create(env, { AUTH_FAILURES: { value: authFailures as unknown as RateLimit } }) as Env;
      withLimiter.set(env, wrapped);
    }
    return wrapped;
  };
  return {
    fetch: async (request, env, ctx) =>
      withDate(await handler.fetch(withTrustedClientIp(request, env.CLIENT_IP_HEADER) as typeof request, selfHostedEnv(env), ctx), now()),
  };
}

/** The response with a `Date` header (RFC 9110 §6.6.1), unless it has one. */
export function withDate(response: Response, nowMs: number): Response {
  if (response.headers.has("date")) return response;
  const date = new Date(nowMs).toUTCString();
  try {
    response.headers.set("date", date);
    return response;
  } catch {
    // Immutable headers (a response passed through from a fetch): a copy takes them.
    const copy = new Response(response.body, response);
    copy.headers.set("date", date);
    return copy;
  }
}
