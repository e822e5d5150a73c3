import { describe, expect, it } from "vitest";
import { howToRejoin, markerWithoutDataMessage, refusalMessage, type NodePlace } from "./data-dir-messages.ts";
import type { RefusalRule } from "./data-dir-rules.ts";

const at: NodePlace = {
  node: "ctrl-2",
  cluster: "prod-eu",
  brokerUrl: "https://join.example.com",
  peerURL: "https://10.0.0.12:2380",
  dataDir: "/var/lib/etcd",
  markerPath: "/var/lib/jb/joined.json",
  statePath: "/var/lib/jb/state.json",
  owned: { cluster: "prod-eu", role: "join", memberID: "10501334649042878790", voter: true },
};

describe("refusal messages", () => {
  it("say what is wrong and what to do, with this node's own paths and names", () => {
    const rules: RefusalRule[] = [
      "foreign_data",
      "other_cluster",
      "role_changed",
      "joined_never_bootstraps",
      "joined_without_data",
      "started_voter_without_data",
      "not_ours",
      "marker_says_joined",
      "bootstrapped_here",
      "was_voter",
    ];
    for (const rule of rules) {
      const text = refusalMessage(at, rule, "join", "9bbcd4a0f1c2e0a6");
      expect(text.length, rule).toBeGreaterThan(60);
      expect(text, rule).toMatch(/\/var\/lib\/(etcd|jb)/);
    }
    expect(refusalMessage(at, "was_voter", "join", "etcd says it was removed")).toContain("member 91bc3c398fb3c146 was a voter");
    expect(refusalMessage(at, "started_voter_without_data", "join", "9bbcd4a0f1c2e0a6")).toContain("etcdctl member remove 9bbcd4a0f1c2e0a6");
  });

  it("give one way back for a membership whose data is gone", () => {
    const text = howToRejoin(at, "9bbcd4a0f1c2e0a6");
    expect(text).toContain("etcdctl member remove 9bbcd4a0f1c2e0a6");
    expect(text).toContain("join-broker admin forget ctrl-2 --cluster prod-eu --broker https://join.example.com");
    expect(text).toContain("delete /var/lib/jb/joined.json");
    expect(howToRejoin(at, undefined)).toContain("member remove <id>");
  });
});

describe("a joined node whose data is gone", () => {
  it("is told by whom it joined and the way back, with the member when it is known", () => {
    expect(refusalMessage(at, "joined_without_data", "join", "9bbcd4a0f1c2e0a6")).toMatch(
      /^the broker says ctrl-2 already joined cluster prod-eu as member 9bbcd4a0f1c2e0a6, but \/var\/lib\/etcd holds no etcd data\. .*etcdctl member remove 9bbcd4a0f1c2e0a6/,
    );
    expect(refusalMessage(at, "joined_without_data", "join")).toContain(
      "already joined cluster prod-eu, but /var/lib/etcd holds no etcd data. This node will not start etcd: it must neither start a new cluster nor reuse a membership whose data is gone. To join it again: remove its old member from etcd (etcdctl member remove <id>)",
    );
    expect(markerWithoutDataMessage(at, "9bbcd4a0f1c2e0a6")).toBe(
      `/var/lib/jb/joined.json says this node joined cluster prod-eu, but /var/lib/etcd holds no etcd data. This node will not start etcd. ${howToRejoin(at, "9bbcd4a0f1c2e0a6")}`,
    );
  });
});
