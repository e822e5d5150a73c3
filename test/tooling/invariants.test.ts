/** The e2e harness's running invariants (test/support/invariants.ts) catch what they are for. */
import { describe, expect, it } from "vitest";
import { RunInvariants } from "../support/invariants.ts";

describe("the run invariants", () => {
  it("accept a run that grows one learner at a time within one cluster", () => {
    const inv = new RunInvariants(1);
    expect(inv.check([{ node: "a", clusterId: null, learners: null }])).toBeNull();
    expect(inv.check([{ node: "a", clusterId: "c1", learners: 0 }])).toBeNull();
    expect(
      inv.check([
        { node: "a", clusterId: "c1", learners: 1 },
        { node: "b", clusterId: null, learners: null },
      ]),
    ).toBeNull();
    expect(
      inv.check([
        { node: "a", clusterId: "c1", learners: 0 },
        { node: "b", clusterId: "c1", learners: 0 },
      ]),
    ).toBeNull();
  });

  it("reject more learners than maxInFlight at any sample", () => {
    expect(new RunInvariants(1).check([{ node: "a", clusterId: "c1", learners: 2 }])).toMatch(/2 learners at once, more than maxInFlight 1 \(a lists 2\)/);
    expect(new RunInvariants(2).check([{ node: "a", clusterId: "c1", learners: 2 }])).toBeNull();
  });

  it("reject a second cluster ID, at once or later in the run", () => {
    expect(
      new RunInvariants(1).check([
        { node: "a", clusterId: "c1", learners: 0 },
        { node: "b", clusterId: "c2", learners: 0 },
      ]),
    ).toMatch(/2 cluster IDs/);
    const inv = new RunInvariants(1);
    expect(inv.check([{ node: "a", clusterId: "c1", learners: 0 }])).toBeNull();
    expect(inv.check([{ node: "b", clusterId: "c2", learners: 0 }])).toMatch(/the run's is c1; b: c2/);
  });
});
