/**
 * The invariants every end-to-end run holds at every sample, not only at its end: at most
 * `maxInFlight` learners at once, and one cluster ID for the whole run (a node that
 * bootstrapped a cluster of its own would serve another).
 */

/** What one node's etcd said at a sample; null fields when it did not answer. */
export interface NodeSample {
  node: string;
  clusterId: string | null;
  learners: number | null;
}

export class InvariantViolation extends Error {
  override readonly name = "InvariantViolation";
}

/** Checks the invariants over a run; `check` returns the violation of a sample, or null. */
export class RunInvariants {
  /** The run's cluster ID, from the first sample that had one. */
  clusterId: string | null = null;

  constructor(readonly maxInFlight: number) {}

  check(samples: readonly NodeSample[]): string | null {
    const problems: string[] = [];
    const learners = Math.max(0, ...samples.map((s) => s.learners ?? 0));
    if (learners > this.maxInFlight) {
      const who = samples.filter((s) => (s.learners ?? 0) > this.maxInFlight).map((s) => `${s.node} lists ${s.learners}`);
      problems.push(`${learners} learners at once, more than maxInFlight ${this.maxInFlight} (${who.join(", ")})`);
    }
    const ids = new Set(samples.map((s) => s.clusterId).filter((id): id is string => id !== null));
    if (this.clusterId === null && ids.size > 0) this.clusterId = [...ids][0]!;
    if (this.clusterId !== null) ids.add(this.clusterId);
    if (ids.size > 1) {
      const who = samples.filter((s) => s.clusterId !== null).map((s) => `${s.node}: ${s.clusterId}`);
      problems.push(`${ids.size} cluster IDs (the run's is ${this.clusterId}; ${who.join(", ")})`);
    }
    return problems.length ? problems.join("; ") : null;
  }
}
