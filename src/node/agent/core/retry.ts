/**
 * Waiting between attempts: abortable sleeps, `Retry-After` honoured with jitter (never earlier
 * than the server asked, so that a crowd of agents spreads out instead of coming back together),
 * and capped exponential backoff with full jitter for failures that carry no hint.
 * @module
 */
import { TransportError } from "../../../shared/client/exchange.ts";

export type Random = () => number;

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(
      () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Resolves with "stop" once the signal aborts (at once if it has): for racing a process's end. */
export function untilAborted(signal: AbortSignal): Promise<"stop"> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve("stop");
    else signal.addEventListener("abort", () => resolve("stop"), { once: true });
  });
}

/**
 * A long wait's progress note, said at most every `everyMs` (10 s): no minute of waiting is
 * silent, and no poll is noisy.
 */
export class PeriodicNote {
  #last = performance.now();

  constructor(readonly everyMs = 10_000) {}

  /** Whether a note is due now; when it is, the next one is due `everyMs` later. */
  due(): boolean {
    const now = performance.now();
    if (now - this.#last <= this.everyMs) return false;
    this.#last = now;
    return true;
  }
}

/** Milliseconds to wait for a `Retry-After` of `seconds`: at least that, plus up to a quarter more. */
export function retryAfterDelay(seconds: number, random: Random = Math.random): number {
  const base = Math.max(0, seconds) * 1000;
  return Math.round(base + base * 0.25 * random()) || Math.round(250 + 250 * random());
}

/** Capped exponential backoff with full jitter. `reset()` after a success. */
export class Backoff {
  #attempt = 0;

  constructor(
    readonly baseMs = 500,
    readonly capMs = 10_000,
    readonly random: Random = Math.random,
  ) {}

  /** The next delay: uniform in [base/2, min(cap, base * 2^attempt)]. */
  next(): number {
    const ceiling = Math.min(this.capMs, this.baseMs * 2 ** this.#attempt);
    this.#attempt = Math.min(this.#attempt + 1, 30);
    return Math.round(this.baseMs / 2 + (ceiling - this.baseMs / 2) * this.random());
  }

  /**
   * The delay to use when the server gave a `Retry-After`, else the next backoff step. A
   * `Retry-After` under a second (`0`, from a proxy, say) is no hint: "not now" repeated at once
   * would be a busy loop, so it backs off like no hint at all.
   */
  after(retryAfterSeconds: number | null): number {
    if (retryAfterSeconds === null || retryAfterSeconds < 1) return this.next();
    this.#attempt = Math.min(this.#attempt + 1, 30);
    return retryAfterDelay(retryAfterSeconds, this.random);
  }

  reset(): void {
    this.#attempt = 0;
  }

  get attempts(): number {
    return this.#attempt;
  }
}

/**
 * Consecutive 500 answers from a server. A 500 is a fault in the server's own code, not a "come
 * back later": retrying at once repeats it. Each one is reported and backed off from, longer each
 * time, and after `limit` in a row the caller gives up with a clear message instead of retrying
 * forever. Any other answer resets the count.
 */
export class ServerFailures {
  #count = 0;

  constructor(
    readonly limit = 5,
    readonly baseMs = 1_000,
    readonly capMs = 60_000,
    readonly random: Random = Math.random,
  ) {}

  /** Records a 500: the delay before trying again, or null once `limit` came in a row. */
  failed(): number | null {
    this.#count++;
    if (this.#count >= this.limit) return null;
    const ceiling = Math.min(this.capMs, this.baseMs * 2 ** (this.#count - 1));
    return Math.round(ceiling * (0.5 + 0.5 * this.random()));
  }

  reset(): void {
    this.#count = 0;
  }

  get count(): number {
    return this.#count;
  }
}

/** What one attempt of `retrying` decided. */
export type Step<T> =
  /** Finished, with this result. */
  | { done: T }
  /** Not now: wait the server's `Retry-After` (seconds) or, when null, the next backoff step. */
  | { wait: number | null }
  /** Try again at once (the attempt did its own waiting). */
  | { again: true };

export interface RetryOptions {
  backoff: Backoff;
  signal: AbortSignal;
  /** The server could not be reached (refused, reset, timed out): reported, then backed off from. */
  onUnreachable(reason: string): void;
}

/**
 * The one retry loop of the agent: calls `attempt` until it is done. A `TransportError` (no
 * answer) is reported and backed off from; any other exception ends the loop. An aborted
 * signal ends any wait.
 */
export async function retrying<T>(options: RetryOptions, attempt: () => Promise<Step<T>>): Promise<T> {
  for (;;) {
    let step: Step<T>;
    try {
      step = await attempt();
    } catch (e) {
      if (!(e instanceof TransportError)) throw e;
      options.onUnreachable(e.reason);
      await sleep(options.backoff.next(), options.signal);
      continue;
    }
    if ("done" in step) return step.done;
    if ("wait" in step) await sleep(options.backoff.after(step.wait), options.signal);
  }
}
