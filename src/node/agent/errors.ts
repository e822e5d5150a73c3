/**
 * How a run of the agent ends, other than by joining. Each maps to one exit code.
 * @module
 */
/** The node must not (or cannot) join as asked: exit 3. */
export class Refusal extends Error {
  override readonly name: string = "Refusal";
  readonly code: string = "ERR_AGENT_REFUSED";
}

/** Retried until the deadline, or etcd keeps failing: exit 4. */
export class GaveUp extends Error {
  override readonly name: string = "GaveUp";
  readonly code: string = "ERR_AGENT_GAVE_UP";
}

/** SIGINT or SIGTERM arrived. */
export class Stopped extends Error {
  override readonly name = "Stopped";
  readonly code = "ERR_AGENT_STOPPED";
  constructor(readonly signal: NodeJS.Signals) {
    super(`stopped by ${signal}`);
  }

  get exitCode(): number {
    return this.signal === "SIGINT" ? 130 : 143;
  }
}
