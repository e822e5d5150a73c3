/** Exit codes of every `join-broker` command (docs/protocol.md, "Command line"). */
export const EXIT = {
  ok: 0,
  /** Unexpected failure (a bug, or the broker answered something unreadable). */
  failure: 1,
  usage: 2,
  /** Revoked, forbidden, or told never to proceed. */
  refused: 3,
  /** Retried until the deadline or the lease ran out. */
  gaveUp: 4,
} as const;

export class UsageError extends Error {
  override readonly name = "UsageError";
  readonly code = "ERR_USAGE";
}
