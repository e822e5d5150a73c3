/**
 * What every step taken while admitted works with: the admitted ticket (its admission token,
 * lease and the cluster's slots, always there: the type says so) and the signal that ends it.
 * @module
 */
import type { AdmittedTicket } from "../../../shared/protocol/wire.ts";

export interface Admission {
  /** The admitted ticket; `ticket.admission` is the bearer for the broker and the join API. */
  readonly ticket: AdmittedTicket;
  /** Aborts when the admission ends (the lease, a revocation), at --timeout, or on a signal. */
  readonly signal: AbortSignal;
}
