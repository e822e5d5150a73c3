/**
 * How every command meets SIGINT and SIGTERM: the first one asks it to stop cleanly (etcd,
 * workerd, the join API and a follower wind down); a second one ends the process at once, with
 * the shell's code for that signal (130, 143).
 * @module
 */
import { constants } from "node:os";

const STOP_SIGNALS = ["SIGINT", "SIGTERM"] as const;

/** Calls `handler` on each of `signals` until the returned function is called. */
export function onSignals(signals: readonly NodeJS.Signals[], handler: (signal: NodeJS.Signals) => void): () => void {
  const handlers = signals.map((s) => [s, () => handler(s)] as const);
  for (const [s, h] of handlers) process.on(s, h);
  return () => {
    for (const [s, h] of handlers) process.off(s, h);
  };
}

/** The code a shell reports for a process ended by `signal`. */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + constants.signals[signal];
}

export interface StopRequest {
  /** Aborted by the first signal, with `reason(signal)` as its reason. */
  signal: AbortSignal;
  /** Resolves with the first signal. */
  stopped: Promise<NodeJS.Signals>;
  /** Stops listening. */
  release(): void;
}

/** Listens for SIGINT and SIGTERM until `release()`: the first aborts `signal`, the second exits. */
export function stopOnSignals(reason: (signal: NodeJS.Signals) => unknown = (s) => s): StopRequest {
  const stop = new AbortController();
  let resolveStopped!: (signal: NodeJS.Signals) => void;
  const stopped = new Promise<NodeJS.Signals>((ok) => (resolveStopped = ok));
  const release = onSignals(STOP_SIGNALS, (signal) => {
    if (stop.signal.aborted) process.exit(signalExitCode(signal));
    stop.abort(reason(signal));
    resolveStopped(signal);
  });
  return { signal: stop.signal, stopped, release };
}
