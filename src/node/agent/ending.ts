/**
 * How a run that did not join ends: which exit code, what the operator reads, and what is left
 * behind. A node that cannot go on gives its turn up at once (it leaves the queue) rather than
 * hold it until its lease ends; the etcd this agent started is stopped, unless it is a voter by
 * now: taking a voter down on our own could cost the cluster its quorum.
 * @module
 */
import { EXIT, UsageError } from "../exit-codes.ts";
import { PkiError } from "../pki/x509.ts";
import type { AgentContext } from "./agent-context.ts";
import { GaveUp, Refusal, Stopped } from "./errors.ts";
import { AdmissionRevoked } from "./lease.ts";

/** Ends the run on `e`: its exit code (a UsageError is thrown on, for the command line to word). */
export async function endRun(ctx: AgentContext, e: unknown): Promise<number> {
  const r = ctx.reporter;
  if (!(e instanceof Stopped)) await ctx.gate?.stopCommand();
  if (e instanceof Stopped) {
    // Only what this agent runs is stopped; a node still queued runs nothing.
    const running = ctx.gate?.commandRunning ? "; stopping the command" : ctx.etcd.supervisor?.running ? "; stopping etcd" : "";
    r.event("stopping", `${e.message}${running}. Run the same command again to resume.`);
    await ctx.etcd.supervisor?.stop();
    return e.exitCode;
  }
  if (e instanceof UsageError) {
    // Bad usage found only once the broker answered: the turn goes to the next node at once.
    if (!(await stopEtcdUnlessVoter(ctx))) await ctx.broker.leave(ctx.files.ticket);
    throw e;
  }
  // A CA that is half there, unreadable, or another than the join API's: the operator must fix it.
  if (e instanceof PkiError) e = new Refusal(`${e.message} (--pki-dir)`);
  if (e instanceof AdmissionRevoked || e instanceof Refusal) {
    const kept = await stopEtcdUnlessVoter(ctx);
    // A revoked admission has nothing left to give up; an ended admission is also what lets the
    // join API remove this node's learner for the next node.
    const left = kept || e instanceof AdmissionRevoked ? "" : await ctx.broker.leave(ctx.files.ticket);
    r.event("refused", `${e.message}${left}${kept}`);
    return EXIT.refused;
  }
  if (e instanceof GaveUp) {
    const kept = await stopEtcdUnlessVoter(ctx);
    const left = kept ? "" : await ctx.broker.leave(ctx.files.ticket);
    r.event("gave-up", `${e.message}${left}${kept}`);
    return EXIT.gaveUp;
  }
  const kept = await stopEtcdUnlessVoter(ctx);
  r.event("error", `${e instanceof Error ? e.message : String(e)}${kept}`);
  return EXIT.failure;
}

/**
 * Stops the etcd this agent started, unless it already is a voter. Returns a note for the
 * message when it keeps running (and then the caller keeps the ticket too).
 */
async function stopEtcdUnlessVoter(ctx: AgentContext): Promise<string> {
  const { etcd } = ctx;
  if (!etcd.supervisor) return "";
  if (!etcd.supervisor.running) {
    // Between restarts: no restart may follow the agent's last word.
    await etcd.supervisor.stop();
    return "";
  }
  const s = etcd.foreignAnswered ? null : await etcd.gateway.status(ctx.options.clientURL);
  if (s?.ok && !s.value.isLearner) {
    etcd.supervisor.release();
    return ` etcd (pid ${etcd.supervisor.pid}) is a voting member and keeps running; stop it only after removing the member from the cluster, or run this command again.`;
  }
  await etcd.supervisor.stop();
  return "";
}
