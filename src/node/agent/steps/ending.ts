/**
 * How a run that did not join ends: which exit code, what the operator reads, and what is left
 * behind. A node that cannot go on gives its turn up at once (it leaves the queue) rather than
 * hold it until its lease ends; what the mode's runner runs is stopped, unless the node is a voter
 * by now: taking a voter down on our own could cost the cluster its quorum.
 * @module
 */
import { EXIT, UsageError } from "../../exit-codes.ts";
import { PkiError } from "../../pki/x509.ts";
import type { AgentContext } from "./agent-context.ts";
import { GaveUp, Refusal, Stopped } from "../core/errors.ts";
import { AdmissionRevoked } from "../core/lease.ts";
import type { MemberRunner } from "./member-runner.ts";

/** Ends the run on `e`: its exit code (a UsageError is thrown on, for the command line to word). */
export async function endRun(ctx: AgentContext, runner: MemberRunner, e: unknown): Promise<number> {
  const r = ctx.reporter;
  if (e instanceof Stopped) {
    r.event("stopping", `${e.message}${runner.stopping()}. Run the same command again to resume.`);
    await runner.stop();
    return e.exitCode;
  }
  if (e instanceof UsageError) {
    // Bad usage found only once the broker answered: the turn goes to the next node at once.
    if (!(await runner.giveUp())) await ctx.broker.leave(ctx.files.ticket);
    throw e;
  }
  // A CA that is half there, unreadable, or another than the join API's: the operator must fix it.
  if (e instanceof PkiError) e = new Refusal(`${e.message} (--pki-dir)`);
  if (e instanceof AdmissionRevoked || e instanceof Refusal) {
    const kept = await runner.giveUp();
    // A revoked admission has nothing left to give up; an ended admission is also what lets the
    // join API remove this node's learner for the next node.
    const left = kept || e instanceof AdmissionRevoked ? "" : await ctx.broker.leave(ctx.files.ticket);
    r.event("refused", `${e.message}${left}${kept}`);
    return EXIT.refused;
  }
  if (e instanceof GaveUp) {
    const kept = await runner.giveUp();
    const left = kept ? "" : await ctx.broker.leave(ctx.files.ticket);
    r.event("gave-up", `${e.message}${left}${kept}`);
    return EXIT.gaveUp;
  }
  const kept = await runner.giveUp();
  r.event("error", `${e instanceof Error ? e.message : String(e)}${kept}`);
  return EXIT.failure;
}
