/**
 * A node that joined: the broker says so (a crash after `complete`, or an adopted member), or
 * the marker of an earlier run does. Its etcd starts on its data as a voter, never on none, and
 * then the agent announces the join and supervises etcd (or, in gate mode, the installer's
 * command) until a signal.
 * @module
 */
import { memberIdHex } from "../../shared/protocol/member-id.ts";
import type { TicketView } from "../../shared/protocol/wire.ts";
import { EXIT, UsageError } from "../exit-codes.ts";
import { withDeadline, type AgentContext } from "./agent-context.ts";
import { markerWithoutDataMessage } from "./data-dir-messages.ts";
import { decideDataDir } from "./data-dir-rules.ts";
import { Refusal } from "./errors.ts";
import { untilAborted } from "./retry.ts";
import { hasEtcdData, type JoinedMarker } from "./state-files.ts";

/** The broker says this node already joined: its etcd runs again on its data, or, in gate mode, etcd must list it a voter. */
export async function alreadyJoined(ctx: AgentContext, view: TicketView, signal: AbortSignal): Promise<JoinedMarker> {
  const { node, cluster, dataDir, peerURL } = ctx.options;
  const { files, etcd } = ctx;
  if (ctx.gate) {
    const voter = await ctx.gate.findVoter();
    if (!voter) {
      throw new Refusal(
        `the broker says ${node} already joined cluster ${cluster}, but etcd (${ctx.options.etcdEndpoints.join(", ")}) lists no started voter with peer URL ${peerURL}. ` +
          `If its member is gone for good: run 'join-broker admin forget ${node} --cluster ${cluster} --broker ${ctx.options.brokerUrl}', delete ${files.dir.markerPath} if it exists, and run this command again.`,
      );
    }
    return files.writeMarker(view, voter.memberID, voter.clusterID);
  }
  const decision = decideDataDir(files.disk(), { kind: "joined", cluster });
  if (decision.action === "refuse" && decision.rule === "joined_without_data")
    throw new Refusal(files.refusal(decision.rule, view.role, view.memberID ? memberIdHex(view.memberID) : ""));
  ctx.reporter.event("ticket", `the broker says this node already joined; its etcd data is in ${dataDir}`, { memberID: view.memberID });
  if (!files.owned) etcd.record({ role: view.role, ticket: view.ticket, initialCluster: [`${node}=${peerURL}`], initialClusterState: "existing", voter: true });
  etcd.markVoter();
  await etcd.start(signal);
  const status = await etcd.wait("serving", signal, view.memberID ? { kind: "member", memberID: view.memberID, per: "the broker says so" } : undefined);
  return files.writeMarker(view, status.header.memberId, status.header.clusterId);
}

/** A marker from an earlier run: the node joined. Without --etcd-bin there is nothing more to do. */
export async function resumeJoined(ctx: AgentContext, marker: JoinedMarker): Promise<number> {
  const o = ctx.options;
  const { files, etcd } = ctx;
  if (marker.cluster !== o.cluster || marker.node !== o.node) {
    throw new UsageError(
      `${files.dir.markerPath} says node ${marker.node} joined cluster ${marker.cluster}; this state dir is not for ${o.node} in ${o.cluster}`,
    );
  }
  if (!etcd.supervisor) return serveJoined(ctx, marker);
  if (!hasEtcdData(o.dataDir)) {
    throw new Refusal(markerWithoutDataMessage(files.where(), memberIdHex(marker.memberID)));
  }
  ctx.reporter.event("start", `already joined cluster ${marker.clusterID ?? "?"} as ${marker.role}: starting etcd on its data`);
  if (!files.owned)
    etcd.record({ role: marker.role, ticket: marker.ticket, initialCluster: [`${o.node}=${o.peerURL}`], initialClusterState: "existing", voter: true });
  etcd.markVoter();
  const status = await withDeadline(ctx, async (signal) => {
    await etcd.start(signal);
    return etcd.wait("serving", signal, marker.memberID ? { kind: "member", memberID: marker.memberID, per: `per ${files.dir.markerPath}` } : undefined);
  });
  const clusterID = memberIdHex(status.header.clusterId);
  if (marker.clusterID && clusterID !== marker.clusterID) {
    ctx.reporter.event("error", `etcd reports cluster ${clusterID}, but the marker says ${marker.clusterID}`);
  }
  return serveJoined(ctx, { ...marker, clusterID });
}

/** Announces the join, then (with --etcd-bin) supervises etcd until a signal. */
export async function serveJoined(ctx: AgentContext, marker: JoinedMarker): Promise<number> {
  const r = ctx.reporter;
  const line = `joined cluster ${marker.clusterID ?? "unknown"} as ${marker.role}`;
  // Progress first: on a terminal it ends the updating line, so stdout's line stands on its own.
  r.event("joined", line, { clusterID: marker.clusterID, memberID: marker.memberID, memberIDHex: memberIdHex(marker.memberID), role: marker.role });
  ctx.print(line);
  if (ctx.gate) {
    const end = await ctx.gate.serve(ctx.stop, { role: marker.role, ticket: marker.ticket });
    if (end.code === "ok") return EXIT.ok;
    r.event("gave-up", end.message ?? "the command failed");
    return EXIT.gaveUp;
  }
  const supervisor = ctx.etcd.supervisor;
  if (!supervisor) return EXIT.ok;
  r.event("running", `supervising etcd (pid ${supervisor.pid ?? "?"}) until stopped`, { pid: supervisor.pid });
  const outcome = await Promise.race([untilAborted(ctx.stop), supervisor.failed]);
  if (outcome === "stop") {
    r.event("stopping", "stopping etcd");
    await supervisor.stop();
    return EXIT.ok;
  }
  r.event("gave-up", ctx.etcd.withLogTail(outcome));
  return EXIT.gaveUp;
}
