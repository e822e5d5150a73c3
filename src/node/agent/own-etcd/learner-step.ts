/**
 * Every node but the bootstrap one: the join API adds it as a learner, its etcd starts on the
 * existing cluster and catches up, the join API promotes it, and the broker hears it is a voter.
 * What the add means for the data dir is data-dir-rules.ts's `afterAdd`.
 * @module
 */
import { memberIdHex } from "../../../shared/protocol/member-id.ts";
import type { Admission } from "../steps/admission.ts";
import type { OwnEtcdContext } from "./own-etcd-context.ts";
import type { Voter } from "../steps/member-runner.ts";
import { afterAdd } from "../files/data-dir-rules.ts";
import { Refusal } from "../core/errors.ts";
import type { ExpectedEtcd } from "../local-etcd/etcd-identity.ts";
import { learnerLimit } from "../local-etcd/own-etcd-flags.ts";

export async function joinAsLearner(ctx: OwnEtcdContext, admission: Admission): Promise<Voter> {
  const { ticket: view, signal } = admission;
  const { reporter: r, files, etcd } = ctx;
  files.checkDataIsOurs("join");
  // The join API's revocation list, asked for beside the add rather than before it (a round trip
  // off every join's critical path): checked against the CA once the add has brought it (a first
  // join has none before) and written before etcd starts.
  const listed = ctx.crl?.fetchList(signal);
  r.event("member-add", `asking the join API (${ctx.options.joinApiUrl}) to add this node as a learner`, { ticket: view.ticket });
  let added = await ctx.joinApi.addMember(admission);
  r.event("member-added", `added as ${added.learner ? "learner" : "member"} ${memberIdHex(added.memberID)} of ${added.initialCluster.length}`, {
    memberID: added.memberID,
    memberIDHex: memberIdHex(added.memberID),
    learner: added.learner,
    members: added.initialCluster.length,
  });
  const next = afterAdd(files.disk(), { cluster: ctx.options.cluster, memberID: added.memberID, learner: added.learner, started: added.started });
  if (next.action === "refuse") throw new Refusal(files.refusal(next.rule, "join", memberIdHex(added.memberID)));
  if (next.discardOwned) {
    // etcd's peer URLs are unique: our peer URL now belongs to the new member, so the member
    // the data was made for is gone. etcd would refuse that data ("permanently removed").
    // Certificates this add answered with are the new member's. Without them, the node kept
    // those of the removed member, which the join API revoked when it removed that member (an
    // add held while it made room does so after the list asked for beside it was made): they go
    // aside with its data, and the same admission asks again, for a member that has not started,
    // with new keys.
    const reuse = !!added.certificates || !ctx.options.pkiDir;
    await etcd.discardLearnerData(
      `the join API added this node anew as member ${memberIdHex(added.memberID)}; its data belongs to member ${memberIdHex(files.owned!.memberID!)}, which was removed`,
      {
        keepCertificates: reuse,
      },
    );
    if (!reuse) {
      r.event("member-add", `asking the join API again, with new keys: the certificates this node held were the removed member's`, { ticket: view.ticket });
      added = await ctx.joinApi.addMember(admission);
    }
  }
  etcd.record({
    role: "join",
    ticket: view.ticket,
    initialCluster: added.initialCluster,
    initialClusterState: "existing",
    memberID: added.memberID,
    ...(next.voter ? { voter: true } : {}),
    ...learnerLimit(view),
  });
  // Before etcd first starts: the certificates it must refuse (the join API's list).
  await ctx.crl?.ensureBeforeStart(signal, listed);
  await etcd.start(signal);
  const own: ExpectedEtcd = { kind: "member", memberID: added.memberID, per: "the join API added it" };
  let status = await etcd.wait("serving", signal, own);
  r.event("etcd-ready", `etcd is serving as ${status.isLearner ? "a learner" : "a voter"} of cluster ${memberIdHex(status.header.clusterId)}`, {
    clusterID: memberIdHex(status.header.clusterId),
    memberID: status.header.memberId,
    learner: status.isLearner,
  });
  if (status.isLearner) {
    r.event("promote", "asking the join API to promote this learner to a voter", { memberID: status.header.memberId });
    await ctx.joinApi.promote(admission);
    status = await etcd.wait("voter", signal, own);
  }
  r.event("promoted", `a voter: member ${memberIdHex(status.header.memberId)}`, { memberID: status.header.memberId });
  return { memberID: status.header.memberId, clusterID: status.header.clusterId };
}
