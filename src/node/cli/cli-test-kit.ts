/**
 * For the command line's unit tests, never imported by a command: what a refusal says, and a
 * whole command run in this process.
 * @module
 */
import { vi } from "vitest";
import { UsageError } from "../exit-codes.ts";
import { main } from "./main.ts";

/** The message of the UsageError `parse` throws; an error when it throws none, or another kind. */
export function refusalOf(parse: () => unknown): string {
  try {
    parse();
  } catch (e) {
    if (e instanceof UsageError) return e.message;
    throw e;
  }
  throw new Error("expected a usage error, and there was none");
}

/** Runs `join-broker ARGV` in this process; what it wrote and its exit code. */
export async function cli(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  vi.spyOn(process.stdout, "write").mockImplementation((chunk) => ((stdout += String(chunk)), true));
  vi.spyOn(process.stderr, "write").mockImplementation((chunk) => ((stderr += String(chunk)), true));
  try {
    return { code: await main(argv), stdout, stderr };
  } finally {
    vi.restoreAllMocks();
  }
}
