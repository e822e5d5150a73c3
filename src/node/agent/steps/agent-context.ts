/**
 * What every step of the join works with, in either mode: the options, the progress reporter,
 * this node's files, the session and the conversation with the broker, and the source of jitter.
 * One object, made once per run (agent.ts), so that each step is a plain function of it. What
 * makes the node a member is the mode's `MemberRunner` (member-runner.ts).
 * @module
 */
import type { NodeSession } from "../../../shared/client/node-session.ts";
import type { BrokerSteps } from "./broker-steps.ts";
import { GaveUp } from "../core/errors.ts";
import type { AgentOptions } from "../core/agent-options.ts";
import type { NodeFiles } from "../files/node-files.ts";
import type { Reporter } from "../core/progress.ts";
import type { Random } from "../core/retry.ts";

export interface AgentContext {
  readonly options: AgentOptions;
  readonly reporter: Reporter;
  readonly files: NodeFiles;
  /** This node's session with the broker (the lease keeper heartbeats on it). */
  readonly session: NodeSession;
  readonly broker: BrokerSteps;
  readonly random: Random;
  /** Aborts with `Stopped` on SIGINT/SIGTERM. */
  readonly stop: AbortSignal;
  /** Writes one line to stdout. */
  print(line: string): void;
}

/** Runs `work` under the stop signal and the --timeout deadline (which aborts it with GaveUp). */
export async function withDeadline<T>(ctx: AgentContext, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const seconds = ctx.options.timeoutSeconds;
  if (seconds <= 0) return work(ctx.stop);
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new GaveUp(`not joined within --timeout ${seconds} s`)), seconds * 1000);
  try {
    return await work(AbortSignal.any([ctx.stop, deadline.signal]));
  } finally {
    clearTimeout(timer);
  }
}
