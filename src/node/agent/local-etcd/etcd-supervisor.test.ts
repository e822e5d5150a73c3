import { describe, expect, it } from "vitest";
import { exitReason, healedByNetwork } from "./etcd-supervisor.ts";

describe("which etcd exits the network heals", () => {
  it("counts no peer reachable and a peer that has not heard of this member yet as healable", () => {
    expect(healedByNetwork("cannot fetch cluster info from peer urls: could not retrieve cluster information from the given URLs")).toBe(true);
    // etcd 3.6, a joiner whose only reachable peer was cut off while its member was added.
    expect(
      healedByNetwork("discovery failed: error validating peerURLs {ClusterID:604df89d7fcd60e Members:[…] RemovedMemberIDs:[]}: member count is unequal"),
    ).toBe(true);
  });
  it("counts what the network cannot heal toward giving up", () => {
    expect(healedByNetwork("listen tcp 127.0.0.1:2379: bind: address already in use")).toBe(false);
    expect(healedByNetwork("flag provided but not defined: -bogus")).toBe(false);
    expect(healedByNetwork(null)).toBe(false);
  });
  it("decides on etcd's whole reason, however long the member dump before its conclusion (campaign seed 29)", () => {
    const member = (id: string, n: number) =>
      `&{ID:${id} RaftAttributes:{PeerURLs:[https://10.77.0.1${n}:2380] IsLearner:false} Attributes:{Name:ctrl-${n} ClientURLs:[https://10.77.0.1${n}:2379]}}`;
    const error = `error validating peerURLs {ClusterID:c991c04d2491b36b Members:[${member("62618df89796785c", 0)} ${member("89dd038a3661f3a0", 1)} ${member("9027695c5e49528d", 2)}] RemovedMemberIDs:[]}: member count is unequal`;
    const log = [
      JSON.stringify({ level: "info", msg: "closing etcd server", name: "ctrl-3" }),
      JSON.stringify({ level: "fatal", msg: "discovery failed", error, stacktrace: "go.etcd.io/etcd/server/v3/etcdmain.startEtcdOrProxyV2" }),
    ].join("\n");
    const { reason, healed } = exitReason(log);
    expect(healed).toBe(true);
    expect(reason!.length).toBeLessThanOrEqual(400);
    expect(reason).toMatch(/^discovery failed: error validating peerURLs .*….*: member count is unequal$/);
  });
});
