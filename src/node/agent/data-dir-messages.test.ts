import { describe, expect, it } from "vitest";
import { howToRejoin, refusalMessage, type NodePlace } from "./data-dir-messages.ts";
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
    const rules: RefusalRule[] = ["foreign_data", "other_cluster", "role_changed", "joined_never_bootstraps", "started_voter_without_data", "not_ours", "marker_says_joined", "bootstrapped_here", "was_voter"];
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
