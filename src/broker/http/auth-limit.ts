/**
 * The failed-authentication limit: 20 failures per client address in 60 s, then 429 with
 * `Retry-After` for the rest of the period, before any credential is compared, so that a right
 * guess from a throttled client is refused like a wrong one.
 *
 * The counting is the `AUTH_FAILURES` rate-limiting binding's (Cloudflare's, or the self-hosted
 * stand-in): its only call, `limit()`, counts one and says whether the key is over. A key it
 * refused is remembered here, in the isolate's memory, until the period ends; that is what
 * requests are checked against before anything is compared. On Cloudflare an isolate that has
 * not seen the refusal yet compares once more, counts the failure, and learns it.
 * @module
 */

/** Must equal `[[ratelimits]] simple` of wrangler.toml (a unit test compares them). */
export const AUTH_FAILURE_LIMIT = { limit: 20, period: 60 } as const;

/** Blocks kept before ended ones are swept, and at most: a flood of addresses cannot grow memory without end. */
const SWEEP_AT = 10_000;
const MAX_KEYS = 100_000;

export class AuthFailureBlocks {
  /** Address → end of its block (ms). Kept in insertion order, which is the order they end in. */
  readonly #until = new Map<string, number>();
  #sweepAt = SWEEP_AT;

  constructor(readonly periodSeconds: number = AUTH_FAILURE_LIMIT.period) {}

  /** Whole seconds until `key` may authenticate again; 0 when it may now. Counts nothing. */
  retryAfter(key: string, now: number): number {
    const until = this.#until.get(key);
    if (until === undefined) return 0;
    if (until <= now) {
      this.#until.delete(key);
      return 0;
    }
    return Math.ceil((until - now) / 1000);
  }

  /** The limiter refused `key` at `now`: block it for one period. Returns the seconds to wait. */
  block(key: string, now: number): number {
    this.#until.delete(key);
    this.#until.set(key, now + this.periodSeconds * 1000);
    if (this.#until.size >= this.#sweepAt) this.#sweep(now);
    return this.periodSeconds;
  }

  get size(): number {
    return this.#until.size;
  }

  /** Drops ended blocks, then, when still full, the oldest (such an address is compared once more, and blocked again). */
  #sweep(now: number): void {
    for (const [key, until] of this.#until) if (until <= now) this.#until.delete(key);
    let excess = this.#until.size - MAX_KEYS * 0.9;
    for (const key of this.#until.keys()) {
      if (excess-- <= 0) break;
      this.#until.delete(key);
    }
    this.#sweepAt = Math.min(MAX_KEYS, Math.max(SWEEP_AT, this.#until.size * 2));
  }
}
