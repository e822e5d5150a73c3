import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { TicketView } from "../../../shared/protocol/wire.ts";
import { UsageError } from "../../exit-codes.ts";
import { Refusal } from "../core/errors.ts";
import type { AgentOptions } from "../core/agent-options.ts";
import { testAgentOptions } from "../core/agent-test-kit.ts";
import { NodeFiles } from "./node-files.ts";
import { StateDir } from "./state-files.ts";

function optionsFor(root: string, node = "n1", peerURL = "https://10.0.0.1:2380"): AgentOptions {
  return testAgentOptions(root, { node, peerURL, more: { dataDir: join(root, "data") } });
}

const view = (over: Partial<TicketView> = {}): TicketView => ({ ticket: "tkt_1", state: "admitted", role: "join", ...over }) as TicketView;

/** Gives the data dir a write-ahead log, as etcd leaves one. */
function withEtcdData(root: string): void {
  mkdirSync(join(root, "data", "member", "wal"), { recursive: true });
  writeFileSync(join(root, "data", "member", "wal", "0000000000000000-0000000000000000.wal"), "x");
}

describe("this node's files", () => {
  it("starts fresh, then keeps what each step saves across runs", () => {
    const root = mkdtempSync(join(tmpdir(), "node-files-"));
    const files = new NodeFiles(optionsFor(root), new StateDir(join(root, "state")));
    expect(files.ticket).toBeUndefined();
    files.load();
    files.save({ ticket: "tkt_1", role: "join" });
    const again = new NodeFiles(optionsFor(root), new StateDir(join(root, "state")));
    again.load();
    expect(again.ticket).toBe("tkt_1");
    expect(again.disk()).toEqual({ hasData: false, owned: null, joined: false });
  });

  it("refuses a state dir of another node, and a peer URL other than the one its etcd was started with", () => {
    const root = mkdtempSync(join(tmpdir(), "node-files-"));
    const files = new NodeFiles(optionsFor(root), new StateDir(join(root, "state")));
    files.load();
    files.save({ etcd: { cluster: "c1", node: "n1", role: "join", ticket: "tkt_1", initialCluster: [], initialClusterState: "existing", at: "" } });
    expect(() => new NodeFiles(optionsFor(root, "n2"), new StateDir(join(root, "state"))).load()).toThrow(UsageError);
    expect(() => new NodeFiles(optionsFor(root, "n1", "https://10.0.0.9:2380"), new StateDir(join(root, "state"))).load()).toThrow(
      /was started with peer URL https:\/\/10\.0\.0\.1:2380/,
    );
  });

  it("refuses to start data it did not make, before anything is asked of etcd", () => {
    const root = mkdtempSync(join(tmpdir(), "node-files-"));
    withEtcdData(root);
    const files = new NodeFiles(optionsFor(root), new StateDir(join(root, "state")));
    files.load();
    expect(() => files.checkDataIsOurs("join")).toThrow(Refusal);
    expect(() => files.checkDataIsOurs("bootstrap")).toThrow(Refusal);
    files.save({ etcd: { cluster: "c1", node: "n1", role: "join", ticket: "tkt_1", initialCluster: [], initialClusterState: "existing", at: "" } });
    expect(() => files.checkDataIsOurs("join")).not.toThrow();
    expect(() => files.checkDataIsOurs("bootstrap")).toThrow(/join/);
  });

  it("writes the marker with etcd's IDs, or else the broker's member, or else the one it recorded", () => {
    const root = mkdtempSync(join(tmpdir(), "node-files-"));
    const files = new NodeFiles(optionsFor(root), new StateDir(join(root, "state")));
    files.load();
    expect(files.writeMarker(view(), "255", "4096")).toMatchObject({ memberID: "255", memberIDHex: "ff", clusterID: "1000", role: "join", ticket: "tkt_1" });
    expect(files.writeMarker(view({ memberID: "16" }), "", "")).toMatchObject({ memberID: "16", clusterID: null });
    files.save({
      etcd: { cluster: "c1", node: "n1", role: "join", ticket: "tkt_1", initialCluster: [], initialClusterState: "existing", memberID: "17", at: "" },
    });
    expect(files.writeMarker(view({ memberID: "16" }), "", "")).toMatchObject({ memberID: "16" });
    expect(files.writeMarker(view(), "", "")).toMatchObject({ memberID: "17", memberIDHex: "11" });
    expect(files.disk().joined).toBe(true);
  });
});
