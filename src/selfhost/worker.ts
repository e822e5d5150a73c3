/**
 * The Worker as `join-broker serve` runs it on workerd: the production Worker and its JoinQueue
 * class unchanged, with the one binding only Cloudflare provides (`AUTH_FAILURES`, the failed
 * authentication rate limiter) supplied by a local equivalent.
 * @module
 */
import worker from "../index.ts";
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
  fetch: (request, env, ctx) => worker.fetch(request, selfHostedEnv(env), ctx),
} satisfies ExportedHandler<Env>;
