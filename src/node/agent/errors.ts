/**
 * How a run of the agent ends, other than by joining. Each maps to one exit code.
 * @module
 */
/** The node must not (or cannot) join as asked: exit 3. */
export class Refusal extends Error {}

/** Retried until the deadline, or etcd keeps failing: exit 4. */
export class GaveUp extends Error {}

/** SIGINT or SIGTERM arrived. */
export class Stopped extends Error {
  constructor(readonly signal: NodeJS.Signals) {
    super(`stopped by ${signal}`);
  }

  get exitCode(): number {
    return this.signal === "SIGINT" ? 130 : 143;
  }
}
