/**
 * Before a node acts on a bootstrap ticket, it asks the other controllers it knows (`--etcd`)
 * whether an etcd cluster already runs there. The broker alone decides who bootstraps, but a
 * broker whose state was rolled back (a backup copied into place, which it cannot tell from a
 * restart) would hand out the bootstrap ticket of a cluster that exists: this node would then
 * start a second one.
 *
 * - An etcd that answers with its cluster ID is proof: refuse. Unless its only member is this
 *   node itself (its own earlier bootstrap, before it could report completion).
 * - An endpoint that cannot be reached proves nothing, and on a genuine first bootstrap the
 *   other controllers run no etcd yet: go ahead, and say which endpoints did not answer.
 * @module
 */
import { EtcdGateway, type EtcdMember } from "../etcd/gateway.ts";
import { canonicalPeerUrl } from "../../shared/protocol/identifiers.ts";

/** What one controller's etcd said. */
export type ControllerAnswer =
  | { endpoint: string; reached: false; error: string }
  /** `members` is null when etcd answered its status but not its member list (no quorum). */
  | { endpoint: string; reached: true; clusterID: string; members: EtcdMember[] | null };

export interface FoundCluster {
  endpoint: string;
  /** Decimal, as etcd's gateway spells it. */
  clusterID: string;
  members: EtcdMember[] | null;
}

/** The first answer that shows a cluster other than this node's own; null when none does. */
export function existingCluster(answers: readonly ControllerAnswer[], peerURL: string): FoundCluster | null {
  const own = canonicalPeerUrl(peerURL);
  for (const a of answers) {
    if (!a.reached) continue;
    const onlyUs = a.members !== null && a.members.length > 0 && a.members.every((m) => m.peerURLs.every((u) => canonicalPeerUrl(u) === own));
    if (!onlyUs) return { endpoint: a.endpoint, clusterID: a.clusterID, members: a.members };
  }
  return null;
}

/** Asks each endpoint (not this node's own client URL) on its own: its status, then its member list. */
export async function askControllers(endpoints: readonly string[], ownClientURL: string, options: { fetch?: typeof fetch; timeoutMs?: number } = {}): Promise<ControllerAnswer[]> {
  const own = canonicalPeerUrl(ownClientURL);
  const others = endpoints.filter((e) => canonicalPeerUrl(e) !== own);
  return Promise.all(
    others.map(async (endpoint): Promise<ControllerAnswer> => {
      const etcd = new EtcdGateway(endpoint, { timeoutMs: options.timeoutMs ?? 3_000, ...(options.fetch ? { fetch: options.fetch } : {}) });
      const status = await etcd.status(endpoint);
      if (!status.ok) return { endpoint, reached: false, error: status.error.message };
      const list = await etcd.memberList();
      return { endpoint, reached: true, clusterID: status.value.header.clusterId, members: list.ok ? list.value.members : null };
    }),
  );
}
