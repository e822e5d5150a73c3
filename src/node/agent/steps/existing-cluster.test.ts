import { describe, expect, it } from "vitest";
import type { EtcdMember } from "../../etcd/gateway.ts";
import { clusterExistsMessage, existingCluster, noClusterNote, type ControllerAnswer } from "./existing-cluster.ts";

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

describe("what the node says of the other controllers' etcd", () => {
  const who = { node: "ctrl-2", cluster: "prod", brokerUrl: "https://broker.example" };

  it("names the cluster found, in hex, and the adopt command with every started member", () => {
    const found = existingCluster([up("http://a:2379", [member("1", "https://10.0.0.1:2380"), { ...member("2", "https://10.0.0.2:2380"), name: "" }])], ME)!;
    const message = clusterExistsMessage(found, who);
    expect(message).toContain("etcd at http://a:2379 already serves cluster 63 (2 members)");
    // The unstarted member has no name yet: only the named one can be given to adopt.
    expect(message).toContain(
      "'join-broker admin adopt --cluster prod --broker https://broker.example --member n1=https://10.0.0.1:2380', then run this command again",
    );
  });

  it("leaves the members to the operator when etcd gave no member list", () => {
    const message = clusterExistsMessage(existingCluster([up("http://a:2379", null)], ME)!, who);
    expect(message).toContain("already serves cluster 63: was the broker's state reset");
    expect(message).toContain("--member NODE=PEERURL …'");
  });

  it("says which controllers did not answer when bootstrapping all the same", () => {
    expect(noClusterNote([])).toBe("no etcd cluster at the other controllers");
    expect(noClusterNote([up("http://b:2379", [member("7", ME)]), down("http://a:2379")])).toBe(
      "no etcd cluster at the other controllers (1 answered); not reached: http://a:2379 (connect ECONNREFUSED), which proves nothing, so bootstrapping all the same",
    );
  });
});
