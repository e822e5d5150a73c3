/**
 * The Worker as `join-broker serve` runs it on workerd: the production Worker and its JoinQueue
 * class unchanged, with the one binding only Cloudflare provides (`AUTH_FAILURES`, the failed
 * authentication rate limiter) supplied by a local equivalent, and the client address it counts
 * against taken only from where it cannot be forged (see client-ip.ts).
 * @module
 */
import worker from "../index.ts";
import { withTrustedClientIp } from "./client-ip.ts";
import { AUTH_FAILURE_LIMIT, FixedWindowLimiter } from "./rate-limit.ts";

export { JoinQueue } from "../index.ts";

const authFailures = new FixedWindowLimiter(AUTH_FAILURE_LIMIT.limit, AUTH_FAILURE_LIMIT.period);
const withLimiter = new WeakMap<Env, Env>();

/** `env` with AUTH_FAILURES added; the other bindings are read through the prototype. */
function selfHostedEnv(env: Env): Env {
  let wrapped = withLimiter.get(env);
  if (!wrapped) {
    wrapped = Object.create(env, { AUTH_FAILURES: { value: authFailures as unknown as RateLimit } }) as Env;
    withLimiter.set(env, wrapped);
  }
  return wrapped;
}

export default {
  fetch: (request, env, ctx) => worker.fetch(withTrustedClientIp(request, (env as { CLIENT_IP_HEADER?: string }).CLIENT_IP_HEADER), selfHostedEnv(env), ctx),
} satisfies ExportedHandler<Env>;
