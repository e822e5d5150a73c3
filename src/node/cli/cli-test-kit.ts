/**
 * For the command line's unit tests, never imported by a command: what a refusal says.
 * @module
 */
import { UsageError } from "../exit-codes.ts";

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
