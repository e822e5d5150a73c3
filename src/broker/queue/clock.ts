/**
 * The JoinQueue's clock: real time plus an offset that only tests (and the bench) move, so that
 * lease, token and retention expiry are tested by advancing time instead of sleeping.
 * @module
 */
export class Clock {
  /** Milliseconds added to real time; 0 in production. */
  offsetMs = 0;

  now(): number {
    return Date.now() + this.offsetMs;
  }

  advance(ms: number): number {
    this.offsetMs += ms;
    return this.now();
  }
}
