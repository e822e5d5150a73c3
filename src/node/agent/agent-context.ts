/**
 * What every step of the join works with: the options, the progress reporter, this node's files,
 * its own etcd, the conversations with the broker and the join API, and the installer in gate
 * mode, the session with the broker and the source of jitter. One object, made once per run (agent.ts), so that each step is a plain function of it.
 * @module
 */
import type { NodeSession } from "../../shared/client/node-session.ts";
import type { BrokerSteps } from "./broker-steps.ts";
import { GaveUp } from "./errors.ts";
import type { Gate } from "./gate.ts";
import type { JoinApiSteps } from "./join-api-steps.ts";
import type { AgentOptions } from "./agent-options.ts";
import type { LocalEtcd } from "./local-etcd.ts";
import type { NodeKeys } from "./node-certificates.ts";
import type { RevocationListKeeper } from "./revocation-list.ts";
import type { NodeFiles } from "./node-files.ts";
import type { Reporter } from "./progress.ts";
import type { Random } from "./retry.ts";

export interface AgentContext {
  readonly options: AgentOptions;
  readonly reporter: Reporter;
  readonly files: NodeFiles;
  readonly etcd: LocalEtcd;
  /** This node's session with the broker (the lease keeper heartbeats on it). */
  readonly session: NodeSession;
  readonly broker: BrokerSteps;
  readonly joinApi: JoinApiSteps;
  /** This node's etcd keys and certificate requests (--pki-dir), made while it waits for its turn. */
  readonly keys: NodeKeys;
  /** Gate mode (--exec): an installer adds the member and runs etcd; see gate.ts. */
  readonly gate: Gate | null;
  readonly random: Random;
  /** With --pki-dir (the agent's own etcd): the revocation list etcd reads, kept current from the join API. */
  readonly crl: RevocationListKeeper | null;
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
