/**
 * Whether the etcd that answers on the client URL is this node's own. Something else may answer
 * there: an etcd left running from an earlier incident, or a wrong `--client-url`, while this
 * node's etcd failed to bind. Its word must never make this node a voter or complete its join.
 *
 * - A joiner's etcd is the member the join API added for it: the status header says that ID.
 *   So is a joined node's, restarted: the member its marker (or the broker) names.
 * - The bootstrap node's etcd is the only member of its cluster, with this node's peer URL.
 *
 * Pure: the agent asks etcd (local-etcd.ts) and turns a mismatch into a refusal.
 * @module
 */
import type { EtcdMember, EtcdStatus } from "../../etcd/gateway.ts";
import { canonicalPeerUrl } from "../../../shared/protocol/identifiers.ts";
import { memberIdHex as hex } from "../../../shared/protocol/member-id.ts";

export type ExpectedEtcd =
  /** This node's member (decimal ID), and who says so (for the message). */
  | { kind: "member"; memberID: string; per: string }
  /** A new cluster whose only member has this peer URL. */
  | { kind: "bootstrap"; peerURL: string };

/** Null when the answer is this node's etcd; else what answered, for the operator. */
export function foreignEtcd(expected: ExpectedEtcd, status: EtcdStatus, members: readonly EtcdMember[]): string | null {
  const self = `member ${hex(status.header.memberId)} of cluster ${hex(status.header.clusterId)}`;
  if (expected.kind === "member") {
    return status.header.memberId === expected.memberID ? null : `${self}, not this node's member ${hex(expected.memberID)} (${expected.per})`;
  }
  const own = members.find((m) => m.id === status.header.memberId);
  const want = canonicalPeerUrl(expected.peerURL);
  if (!own?.peerURLs.some((u) => canonicalPeerUrl(u) === want)) {
    return `${self} with peer URL ${own?.peerURLs.join(", ") || "?"}, not this node's ${expected.peerURL}`;
  }
  if (members.length !== 1) return `${self}, one of ${members.length} members, not the only member of a new cluster`;
  return null;
}
