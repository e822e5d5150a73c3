/**
 * Starting a server process the way every test needs it: spawn it, keep its output, and resolve
 * once it prints the line that says it is ready; reject with everything it printed when it exits
 * first or does not get there in time. No test waits a fixed time for a start-up.
 */
import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";

export interface ReadyProcess {
  proc: ChildProcess;
  /** The ready line's match (its groups: the URL, the port, …). */
  match: RegExpExecArray;
  /** What it printed on stdout and stderr so far (the last 200 kB or so). */
  output(): string;
}

export interface ReadyOptions extends SpawnOptions {
  /** The line that says it is ready, matched against stdout and stderr. */
  ready: RegExp;
  /** For the error: "join-broker serve", "the join API", … */
  what: string;
  /** Default 60 s. */
  timeoutMs?: number;
  /** Every chunk it prints, also after it is ready. */
  onOutput?: (chunk: string) => void;
  /** Right after the spawn, before it is ready (to track its process group, say). */
  onSpawn?: (proc: ChildProcess) => void;
  /** How to start it; default node's `spawn` (a lab host's `spawn` runs it in that host's namespace). */
  spawner?: (command: string, args: string[], options: SpawnOptions) => ChildProcess;
}

export function spawnUntilReady(command: string, args: string[], options: ReadyOptions): Promise<ReadyProcess> {
  const { ready, what, timeoutMs = 60_000, onOutput, onSpawn, spawner = spawn, ...spawnOptions } = options;
  return new Promise((ok, fail) => {
    const proc = spawner(command, args, { stdio: ["ignore", "pipe", "pipe"], ...spawnOptions });
    onSpawn?.(proc);
    let log = "";
    let done = false;
    const timer = setTimeout(() => finish(() => fail(new Error(`${what} did not start within ${Math.round(timeoutMs / 1000)} s:\n${log}`))), timeoutMs);
    const finish = (then: () => void) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      then();
    };
    const onData = (chunk: Buffer) => {
      const text = chunk.toString();
      log += text;
      if (log.length > 400_000) log = log.slice(-200_000);
      onOutput?.(text);
      const match = ready.exec(log);
      if (match) finish(() => ok({ proc, match, output: () => log }));
    };
    proc.stdout!.on("data", onData);
    proc.stderr!.on("data", onData);
    proc.once("error", (e) => finish(() => fail(new Error(`${what} could not be started: ${e.message}`))));
    proc.once("exit", (code, signal) => finish(() => fail(new Error(`${what} exited with ${code ?? signal}:\n${log}`))));
  });
}
