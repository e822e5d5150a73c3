/**
 * The seam between the agent's steps and whoever makes this node an etcd member. The steps
 * around it are the same in either mode: the ticket, the queue, the lease, the completion, the
 * marker, and how a run ends. What differs is behind a `MemberRunner`:
 * - own etcd (own-etcd-runner.ts): the agent adds itself through the join API and runs etcd;
 * - an installer (gate mode, installer-runner.ts): `--exec` runs an unmodified installer, which
 *   adds the member and runs etcd; the agent watches etcd for the voter.
 * @module
 */
import type { EndedTicket, Role } from "../../../shared/protocol/wire.ts";
import type { Admission } from "./admission.ts";
import type { AgentContext } from "./agent-context.ts";
import type { JoinedMarker } from "../files/state-files.ts";

/** This node's member as etcd lists it, with the cluster it belongs to (IDs decimal, as etcd's gateway spells them). */
export interface Voter {
  memberID: string;
  clusterID: string;
}

export interface MemberRunner {
  /** First thing in a run, before the state files are read: what an earlier run left is put right. */
  prepare(): Promise<void>;
  /** A node on its way to the queue: what it can make while the broker is asked (keys), and check now rather than once admitted. */
  beforeQueue(): Promise<void>;
  /** A queued or admitted ticket of this role: a member that ran before runs again while the agent catches up. */
  resume(role: Role): Promise<void>;
  /** Admitted: this node made a started voter (the broker is told and the marker written by the caller). */
  admitted(admission: Admission): Promise<Voter>;
  /** The broker says this node already joined (`ticket` is joined): its member, running again. */
  alreadyJoined(ticket: EndedTicket, signal: AbortSignal): Promise<Voter>;
  /** A marker from an earlier run: what ran for it runs again; the marker as it stands now. */
  resumeJoined(marker: JoinedMarker): Promise<JoinedMarker>;
  /** After the join was announced: supervises what runs until it ends or a signal comes; the exit code. */
  serve(marker: JoinedMarker): Promise<number>;
  /** A signal ends the run: a note for the message on what is stopped (e.g. "; stopping etcd"). */
  stopping(): string;
  /** A signal ends the run: stops what runs. */
  stop(): Promise<void>;
  /**
   * The run ends without a join: stops what runs, unless the node is a voter by now (taking a
   * voter down could cost the cluster its quorum). A note for the message when it keeps running
   * (then the caller keeps the ticket too), else "".
   */
  giveUp(): Promise<string>;
  /** The run is over: background work ends. */
  close(): void;
}

/** One mode: how it asks the broker for a ticket, and its runner for a run. */
export interface RunnerMode {
  /** The broker admits nobody beside this node until its member started (an installer adds its own member). */
  readonly exclusiveUntilStarted: boolean;
  runner(ctx: AgentContext): MemberRunner;
}
