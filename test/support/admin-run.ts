/**
 * Runs `join-broker admin …` as an operator does: the real bin, its exit code and output, with
 * only the JOIN_BROKER_* variables a test gives it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { ROOT } from "./broker.ts";

const BIN = join(ROOT, "bin/join-broker");

export interface AdminRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `join-broker admin …args`; `node` runs the bin on that Node; `live` tracks the child until it exits (for afterAll). */
export function runAdmin(args: string[], options: { env?: Record<string, string>; node?: string; live?: Set<ChildProcess> } = {}): Promise<AdminRun> {
  const env: Record<string, string | undefined> = { ...process.env, ...options.env };
  for (const k of ["JOIN_BROKER_URL", "JOIN_BROKER_ADMIN_TOKEN", "JOIN_BROKER_CLUSTER"]) if (!options.env?.[k]) delete env[k];
  const [cmd, pre] = options.node ? [options.node, [BIN]] : [BIN, []];
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, [...pre, "admin", ...args], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    options.live?.add(child);
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d) => (stdout += d));
    child.stderr!.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      options.live?.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
}
