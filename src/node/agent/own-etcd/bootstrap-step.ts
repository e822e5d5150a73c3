/**
 * The broker's one bootstrap ticket: this node creates the cluster. First it asks the other
 * controllers it knows whether a cluster already runs there (a broker whose state was rolled
 * back would hand the ticket out again); then etcd starts with `--initial-cluster-state new`,
 * the only place the agent ever does so.
 * @module
 */
import { memberIdHex } from "../../../shared/protocol/member-id.ts";
import type { Admission } from "../steps/admission.ts";
import { learnerLimit } from "../local-etcd/own-etcd-flags.ts";
import { secureBootstrapEtcd } from "../local-etcd/secure-etcd.ts";
import type { Voter } from "../steps/member-runner.ts";
import type { OwnEtcdContext } from "./own-etcd-context.ts";

export async function bootstrap(ctx: OwnEtcdContext, admission: Admission): Promise<Voter> {
  const { ticket: view, signal } = admission;
  const { node, peerURL } = ctx.options;
  ctx.reporter.event("bootstrap", "this node holds the cluster's bootstrap ticket: starting a new etcd cluster", { ticket: view.ticket });
  ctx.files.checkDataIsOurs("bootstrap");
  ctx.etcd.record({ role: "bootstrap", ticket: view.ticket, initialCluster: [`${node}=${peerURL}`], initialClusterState: "new", ...learnerLimit(view) });
  await ctx.etcd.start(signal);
  const status = await ctx.etcd.wait("healthy", signal, { kind: "bootstrap", peerURL });
  ctx.reporter.event("etcd-ready", `etcd is healthy: cluster ${memberIdHex(status.header.clusterId)}, member ${memberIdHex(status.header.memberId)}`, {
    clusterID: memberIdHex(status.header.clusterId),
    memberID: status.header.memberId,
  });
  await secureBootstrapEtcd(ctx.options, ctx.reporter, status.header.memberId, signal);
  return { memberID: status.header.memberId, clusterID: status.header.clusterId };
}
