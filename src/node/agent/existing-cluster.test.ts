import { describe, expect, it } from "vitest";
import type { EtcdMember } from "../etcd/gateway.ts";
import { existingCluster, type ControllerAnswer } from "./existing-cluster.ts";

const ME = "https://10.0.0.3:2380";
const member = (id: string, peerURL: string): EtcdMember => ({ id, name: `n${id}`, peerURLs: [peerURL], clientURLs: [], isLearner: false, started: true });
const down = (endpoint: string): ControllerAnswer => ({ endpoint, reached: false, error: "connect ECONNREFUSED" });
const up = (endpoint: string, members: EtcdMember[] | null): ControllerAnswer => ({ endpoint, reached: true, clusterID: "99", members });

describe("a bootstrap ticket against the other controllers' etcd", () => {
  it("goes ahead when no controller runs etcd (a genuine first bootstrap), or none can be reached", () => {
    expect(existingCluster([], ME)).toBeNull();
    expect(existingCluster([down("http://a:2379"), down("http://b:2379")], ME)).toBeNull();
  });

  it("refuses when any controller's etcd answers with a cluster, even one without quorum", () => {
    expect(existingCluster([down("http://a:2379"), up("http://b:2379", [member("1", "https://10.0.0.1:2380")])], ME)).toEqual({
      endpoint: "http://b:2379",
      clusterID: "99",
      members: [member("1", "https://10.0.0.1:2380")],
    });
    expect(existingCluster([up("http://a:2379", null)], ME)).toMatchObject({ endpoint: "http://a:2379", members: null });
    expect(existingCluster([up("http://a:2379", [member("1", ME), member("2", "https://10.0.0.1:2380")])], ME)).not.toBeNull();
  });

  it("is not fooled by its own earlier bootstrap: a cluster whose only member is this node", () => {
    expect(existingCluster([up("http://a:2379", [member("7", `${ME}/`)])], ME)).toBeNull();
  });
});
