/**
 * A node that joined: the broker says so (a crash after `complete`, or an adopted member), or
 * the marker of an earlier run does. What ran for it runs again (the mode's runner: its etcd on
 * its data as a voter, never on none, or in gate mode etcd must list it a voter), then the agent
 * announces the join and supervises what runs until a signal.
 * @module
 */
import { memberIdHex } from "../../../shared/protocol/member-id.ts";
import type { EndedTicket } from "../../../shared/protocol/wire.ts";
import { UsageError } from "../../exit-codes.ts";
import type { AgentContext } from "./agent-context.ts";
import type { MemberRunner } from "./member-runner.ts";
import type { JoinedMarker } from "../files/state-files.ts";

/** The broker says this node already joined: its member runs again, and the marker is written. */
export async function alreadyJoined(ctx: AgentContext, runner: MemberRunner, ticket: EndedTicket, signal: AbortSignal): Promise<JoinedMarker> {
  const voter = await runner.alreadyJoined(ticket, signal);
  return ctx.files.writeMarker(ticket, voter.memberID, voter.clusterID);
}

/** A marker from an earlier run: the node joined. */
export async function resumeJoined(ctx: AgentContext, runner: MemberRunner, marker: JoinedMarker): Promise<number> {
  const o = ctx.options;
  if (marker.cluster !== o.cluster || marker.node !== o.node) {
    throw new UsageError(
      `${ctx.files.dir.markerPath} says node ${marker.node} joined cluster ${marker.cluster}; this state dir is not for ${o.node} in ${o.cluster}`,
    );
  }
  return serveJoined(ctx, runner, await runner.resumeJoined(marker));
}

/** Announces the join, then supervises what runs until a signal. */
export async function serveJoined(ctx: AgentContext, runner: MemberRunner, marker: JoinedMarker): Promise<number> {
  const line = `joined cluster ${marker.clusterID ?? "unknown"} as ${marker.role}`;
  // Progress first: on a terminal it ends the updating line, so stdout's line stands on its own.
  ctx.reporter.event("joined", line, {
    clusterID: marker.clusterID,
    memberID: marker.memberID,
    memberIDHex: memberIdHex(marker.memberID),
    role: marker.role,
  });
  ctx.print(line);
  return runner.serve(marker);
}
