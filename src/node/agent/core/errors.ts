/**
 * How a run of the agent ends, other than by joining. Each maps to one exit code.
 * @module
 */
/** The node must not (or cannot) join as asked: exit 3. */
export class Refusal extends Error {
  override readonly name: string = "Refusal";
  readonly code: string = "ERR_AGENT_REFUSED";
}

/**
 * The broker handed this node a bootstrap ticket, but a cluster already runs at the other
 * controllers (the broker's state was rolled back, say): exit 3, and the ticket is given up.
 */
export class ClusterExists extends Refusal {
  override readonly name = "ClusterExists";
  override readonly code = "ERR_CLUSTER_EXISTS";
}

/** Retried until the deadline, or etcd keeps failing: exit 4. */
export class GaveUp extends Error {
  override readonly name: string = "GaveUp";
  readonly code: string = "ERR_AGENT_GAVE_UP";
}

/**
 * An admitted node could not reach the join API for its whole --join-api-patience before anything
 * was added: it gives its slot back and queues again (never an exit by itself).
 */
export class JoinApiOutOfReach extends Error {
  override readonly name = "JoinApiOutOfReach";
  readonly code = "ERR_JOIN_API_OUT_OF_REACH";
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
