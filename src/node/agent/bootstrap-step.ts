/**
 * The broker's one bootstrap ticket: this node creates the cluster. First it asks the other
 * controllers it knows whether a cluster already runs there (a broker whose state was rolled
 * back would hand the ticket out again); then etcd starts with `--initial-cluster-state new`,
 * the only place the agent ever does so.
 * @module
 */
import { memberIdHex } from "../../shared/protocol/member-id.ts";
import type { Admission } from "./admission.ts";
import { tlsFetch } from "../etcd/tls-fetch.ts";
import { EtcdGrpcReads } from "../etcd/grpc-reads.ts";
import { ownClientFiles } from "../pki/pki-dir.ts";
import type { AgentContext } from "./agent-context.ts";
import { ClusterExists } from "./errors.ts";
import { askControllers, clusterExistsMessage, existingCluster, noClusterNote } from "./existing-cluster.ts";
import { learnerLimit } from "./local-etcd.ts";
import { secureBootstrapEtcd } from "./secure-etcd.ts";
import { sleep } from "./retry.ts";
import type { JoinedMarker } from "./state-files.ts";

export async function bootstrap(ctx: AgentContext, admission: Admission): Promise<JoinedMarker> {
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
  await ctx.broker.complete(admission, status.header.memberId);
  return ctx.files.writeMarker(view, status.header.memberId, status.header.clusterId);
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
