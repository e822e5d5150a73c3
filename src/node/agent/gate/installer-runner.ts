/**
 * Gate mode's runner: once admitted, an unmodified installer (`--exec`) adds the member and runs
 * etcd, and the agent asks etcd, not the installer, whether the node made it (gate.ts).
 * @module
 */
import { EXIT } from "../../exit-codes.ts";
import type { Admission } from "../steps/admission.ts";
import type { AgentContext } from "../steps/agent-context.ts";
import { Refusal } from "../core/errors.ts";
import { checkNoClusterYet } from "../steps/existing-cluster.ts";
import { Gate } from "./gate.ts";
import type { MemberRunner, RunnerMode, Voter } from "../steps/member-runner.ts";
import type { JoinedMarker } from "../files/state-files.ts";

export const installerMode: RunnerMode = { exclusiveUntilStarted: true, runner: (ctx) => new InstallerRunner(ctx) };

export class InstallerRunner implements MemberRunner {
  readonly #ctx: AgentContext;
  readonly #gate: Gate;

  constructor(ctx: AgentContext) {
    this.#ctx = ctx;
    this.#gate = new Gate(ctx.options, ctx.reporter, ctx.files.dir);
  }

  /** A command an earlier agent left running is stopped, and the member an earlier attempt left is removed. */
  prepare(): Promise<void> {
    return this.#gate.prepare();
  }

  async beforeQueue(): Promise<void> {}

  /** The installer runs etcd: nothing of the agent's to start again. */
  async resume(): Promise<void> {}

  async admitted(admission: Admission): Promise<Voter> {
    const { broker } = this.#ctx;
    if (admission.ticket.role === "bootstrap") await checkNoClusterYet(this.#ctx, admission.signal);
    return this.#gate.admitted(
      admission,
      (memberID) => broker.reportStarted(admission, memberID),
      (memberID, detail) => broker.reportStuck(admission, memberID, detail),
    );
  }

  /** etcd must list this node a started voter. */
  async alreadyJoined(): Promise<Voter> {
    const { options: o, files } = this.#ctx;
    const voter = await this.#gate.findVoter();
    if (voter) return voter;
    throw new Refusal(
      `the broker says ${o.node} already joined cluster ${o.cluster}, but etcd (${o.etcdEndpoints.join(", ")}) lists no started voter with peer URL ${o.peerURL}. ` +
        `If its member is gone for good: run 'join-broker admin forget ${o.node} --cluster ${o.cluster} --broker ${o.brokerUrl}', delete ${files.dir.markerPath} if it exists, and run this command again.`,
    );
  }

  async resumeJoined(marker: JoinedMarker): Promise<JoinedMarker> {
    return marker;
  }

  /** The installer's command, still running (or, with --service, started again), until it exits or a signal comes. */
  async serve(marker: JoinedMarker): Promise<number> {
    const end = await this.#gate.serve(this.#ctx.stop, { role: marker.role, ticket: marker.ticket });
    if (end.code === "ok") return EXIT.ok;
    this.#ctx.reporter.event("gave-up", end.message ?? "the command failed");
    return EXIT.gaveUp;
  }

  stopping(): string {
    return this.#gate.commandRunning ? "; stopping the command" : "";
  }

  /** The admitted step already passed the signal on to the command. */
  async stop(): Promise<void> {}

  async giveUp(): Promise<string> {
    await this.#gate.stopCommand();
    return "";
  }

  close(): void {}
}
