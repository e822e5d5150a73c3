import { describe, expect, it } from "vitest";
import { healedByNetwork } from "./etcd-supervisor.ts";

describe("which etcd exits the network heals", () => {
  it("counts no peer reachable and a peer that has not heard of this member yet as healable", () => {
    expect(healedByNetwork("cannot fetch cluster info from peer urls: could not retrieve cluster information from the given URLs")).toBe(true);
    // etcd 3.6, a joiner whose only reachable peer was cut off while its member was added.
    expect(healedByNetwork("discovery failed: error validating peerURLs {ClusterID:604df89d7fcd60e Members:[…] RemovedMemberIDs:[]}: member count is unequal")).toBe(true);
  });
  it("counts what the network cannot heal toward giving up", () => {
    expect(healedByNetwork("listen tcp 127.0.0.1:2379: bind: address already in use")).toBe(false);
    expect(healedByNetwork("flag provided but not defined: -bogus")).toBe(false);
    expect(healedByNetwork(null)).toBe(false);
  });
});
