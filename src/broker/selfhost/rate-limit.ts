/**
 * The self-hosted stand-in for Cloudflare's rate-limiting binding (`AUTH_FAILURES`): the same
 * `limit({ key })` call and the same rule (at most `limit` calls per key in each `period`-second
 * window), counted in the isolate's memory. Cloudflare counts per location; a self-hosted broker
 * is one workerd process, so its one isolate is its one location.
 * @module
 */

export { AUTH_FAILURE_LIMIT } from "../http/auth-limit.ts";

/** Keys kept before expired windows are swept, so a flood of addresses cannot grow memory without end. */
const SWEEP_AT = 10_000;

export class FixedWindowLimiter {
  readonly #windows = new Map<string, { start: number; count: number }>();

  constructor(
    readonly max: number,
    readonly periodSeconds: number,
    readonly now: () => number = Date.now,
  ) {}

  /** Counts one call for `key`; `success` is false once the key is over the limit in this window. */
  async limit({ key }: { key: string }): Promise<{ success: boolean }> {
    return { success: this.take(key) };
  }

  take(key: string): boolean {
    const now = this.now();
    const periodMs = this.periodSeconds * 1000;
    let window = this.#windows.get(key);
    if (!window || now - window.start >= periodMs) {
      if (!window && this.#windows.size >= SWEEP_AT) this.#sweep(now, periodMs);
      window = { start: now - (now % periodMs), count: 0 };
      this.#windows.set(key, window);
    }
    window.count++;
    return window.count <= this.max;
  }

  get size(): number {
    return this.#windows.size;
  }

  #sweep(now: number, periodMs: number): void {
    for (const [key, w] of this.#windows) if (now - w.start >= periodMs) this.#windows.delete(key);
  }
}
