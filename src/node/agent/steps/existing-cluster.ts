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
import { EtcdGateway, type EtcdErrorKind, type EtcdMember } from "../../etcd/gateway.ts";
import { EtcdGrpcReads, type EtcdReads } from "../../etcd/grpc-reads.ts";
import { tlsFetch } from "../../etcd/tls-fetch.ts";
import { ownClientFiles } from "../../pki/pki-dir.ts";
import type { AgentContext } from "./agent-context.ts";
import { ClusterExists } from "../core/errors.ts";
import { sleep } from "../core/retry.ts";

const AUTH_REFUSALS: ReadonlySet<EtcdErrorKind> = new Set(["unauthenticated", "permission_denied", "client_certificate_named"]);
import { canonicalPeerUrl } from "../../../shared/protocol/identifiers.ts";
import { memberIdHex } from "../../../shared/protocol/member-id.ts";

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

/**
 * Asks each endpoint (not this node's own client URL) on its own: its status, then its member
 * list; through `reads` when given (a node's own certificate over gRPC: with etcd's auth on,
 * the JSON gateway answers no certificate). An etcd that refuses for lack of a user is an etcd
 * that answers: a cluster runs there.
 */
export async function askControllers(
  endpoints: readonly string[],
  ownClientURL: string,
  options: { fetch?: typeof fetch; timeoutMs?: number; reads?: (endpoint: string) => Pick<EtcdReads, "status" | "memberList"> } = {},
): Promise<ControllerAnswer[]> {
  const own = canonicalPeerUrl(ownClientURL);
  const others = endpoints.filter((e) => canonicalPeerUrl(e) !== own);
  return Promise.all(
    others.map(async (endpoint): Promise<ControllerAnswer> => {
      const etcd =
        options.reads?.(endpoint) ?? new EtcdGateway(endpoint, { timeoutMs: options.timeoutMs ?? 3_000, ...(options.fetch ? { fetch: options.fetch } : {}) });
      const status = await etcd.status(endpoint);
      if (!status.ok && AUTH_REFUSALS.has(status.error.kind)) return { endpoint, reached: true, clusterID: "", members: null };
      if (!status.ok) return { endpoint, reached: false, error: status.error.message };
      const list = await etcd.memberList();
      return { endpoint, reached: true, clusterID: status.value.header.clusterId, members: list.ok ? list.value.members : null };
    }),
  );
}

/** Who is refused, where the cluster was found, and the one command that tells the broker so. */
export interface RefusedBootstrap {
  node: string;
  cluster: string;
  brokerUrl: string;
}

/** The refusal of a bootstrap ticket for a cluster that already runs: what was found, and how to adopt it. */
export function clusterExistsMessage(found: FoundCluster, { node, cluster, brokerUrl }: RefusedBootstrap): string {
  const known = (found.members ?? []).filter((m) => m.name);
  const adopt = known.length ? known.map((m) => ` --member ${m.name}=${m.peerURLs[0]}`).join("") : " --member NODE=PEERURL …";
  return (
    `the broker gave ${node} the bootstrap ticket of cluster ${cluster}, but etcd at ${found.endpoint} already serves ${found.clusterID ? `cluster ${memberIdHex(found.clusterID)}` : "a cluster (its auth answered, without saying which)"}` +
    `${found.members ? ` (${found.members.length} member${found.members.length === 1 ? "" : "s"})` : ""}: was the broker's state reset or restored from a backup? ` +
    `This node will not start a second cluster. If that is cluster ${cluster}, tell the broker so: ` +
    `'join-broker admin adopt --cluster ${cluster} --broker ${brokerUrl}${adopt}', then run this command again: it joins that cluster.`
  );
}

/** The bootstrap goes ahead: who answered, and which endpoints did not (which proves nothing). */
export function noClusterNote(answers: readonly ControllerAnswer[]): string {
  const missed = answers.filter((a): a is Extract<ControllerAnswer, { reached: false }> => !a.reached);
  const asked = answers.length - missed.length;
  return (
    `no etcd cluster at the other controllers${asked ? ` (${asked} answered)` : ""}` +
    `${missed.length ? `; not reached: ${missed.map((a) => `${a.endpoint} (${a.error})`).join(", ")}, which proves nothing, so bootstrapping all the same` : ""}`
  );
}

/**
 * Before acting on a bootstrap ticket: no etcd cluster may already run at the other
 * controllers (`--etcd`). One that answers is refused (the broker's state was rolled back,
 * say); endpoints that cannot be reached are asked twice, then the bootstrap goes ahead.
 */
export async function checkNoClusterYet(ctx: AgentContext, signal: AbortSignal): Promise<void> {
  const o = ctx.options;
  if (o.controllers.length === 0) return;
  const files = o.etcdTls ?? (o.pkiDir ? ownClientFiles(o.pkiDir) : null);
  // With --pki-dir, as the node asks its own etcd: over gRPC with its peer certificate.
  const ask =
    o.pkiDir && !o.etcdTls ? { reads: (endpoint: string) => new EtcdGrpcReads(endpoint, ownClientFiles(o.pkiDir!)) } : files ? { fetch: tlsFetch(files) } : {};
  let answers = await askControllers(o.controllers, o.clientURL, ask);
  if (answers.some((a) => !a.reached)) {
    await sleep(2_000, signal);
    answers = await askControllers(o.controllers, o.clientURL, ask);
  }
  const found = existingCluster(answers, o.peerURL);
  if (found) throw new ClusterExists(clusterExistsMessage(found, o));
  ctx.reporter.event("bootstrap", noClusterNote(answers), { asked: answers.length, unreachable: answers.filter((a) => !a.reached).length });
}
