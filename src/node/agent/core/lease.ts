/**
 * Keeps an admitted ticket's lease alive while the node joins: a heartbeat every third of the
 * remaining lease, measured against the broker's `Date` so that a skewed local clock cannot let
 * the lease lapse. The broker is the judge of the lease: a heartbeat that cannot reach it is
 * simply tried again, and only the broker's answer ends the lease here. When it says the
 * admission is no longer active, `signal` aborts with `AdmissionRevoked` or `LeaseLost`, which
 * stops whatever the node was doing with that admission.
 * @module
 */
import type { NodeSession } from "../../../shared/client/node-session.ts";
import type { TicketView } from "../../../shared/protocol/wire.ts";
import { TransportError, describeAnswer, type HttpResult } from "../../../shared/client/exchange.ts";
import { sleep, type Random } from "./retry.ts";

/** The admission ended without a revocation (lease expired, ticket abandoned or superseded): ask again. */
export class LeaseLost extends Error {
  override readonly name = "LeaseLost";
  readonly code = "ERR_LEASE_LOST";
  constructor(
    readonly state: string,
    detail: string,
  ) {
    super(detail);
  }
}

/** An admin revoked the admission: the node must not join with it. */
export class AdmissionRevoked extends Error {
  override readonly name = "AdmissionRevoked";
  readonly code = "ERR_ADMISSION_REVOKED";
}

export interface LeaseHooks {
  onHeartbeat?(leaseExpiresAt: string): void;
  onTrouble?(message: string): void;
}

/** Time as the keeper sees it: a seam so that tests move time instead of sleeping. */
export interface LeaseClock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const SYSTEM_CLOCK: LeaseClock = { now: () => Date.now(), sleep };

/** The first heartbeat comes soon: its answer tells the lease on the broker's clock. */
const FIRST_HEARTBEAT_MS = 1_000;

export class LeaseKeeper {
  readonly #controller = new AbortController();
  readonly #stopped = new AbortController();
  /** When the lease ends, on this machine's clock. */
  #leaseExpiresAt: number;
  #first = true;
  #done: Promise<void> = Promise.resolve();

  constructor(
    readonly broker: NodeSession,
    readonly ticket: string,
    readonly admission: string,
    leaseExpiresAt: string | undefined,
    readonly random: Random = Math.random,
    readonly hooks: LeaseHooks = {},
    readonly clock: LeaseClock = SYSTEM_CLOCK,
  ) {
    const parsed = leaseExpiresAt ? Date.parse(leaseExpiresAt) : NaN;
    this.#leaseExpiresAt = Number.isNaN(parsed) ? clock.now() + 30_000 : parsed;
  }

  /** Aborts when the broker says the admission ended. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  start(): void {
    this.#done = this.#loop().catch(() => undefined);
  }

  async stop(): Promise<void> {
    this.#stopped.abort();
    await this.#done;
  }

  async #loop(): Promise<void> {
    const stop = this.#stopped.signal;
    let failures = 0;
    while (!stop.aborted && !this.#controller.signal.aborted) {
      const remaining = this.#leaseExpiresAt - this.clock.now();
      // A third of what is left, with a little jitter; quicker after a failed attempt.
      const delay = this.#first
        ? FIRST_HEARTBEAT_MS
        : failures > 0
          ? Math.min(2_000 * failures, Math.max(1_000, remaining / 4))
          : Math.max(1_000, (remaining / 3) * (0.9 + 0.2 * this.random()));
      this.#first = false;
      await this.clock.sleep(delay, stop);
      let result: HttpResult<TicketView>;
      try {
        result = await this.broker.heartbeat(this.ticket, this.admission, stop);
      } catch (e) {
        if (stop.aborted) return;
        failures++;
        this.hooks.onTrouble?.(`heartbeat failed: ${e instanceof TransportError ? e.reason : String(e)}`);
        continue;
      }
      if (result.status === 200 && result.body) {
        failures = 0;
        const leaseExpiresAt = result.body.state === "admitted" ? result.body.leaseExpiresAt : undefined;
        const next = leaseExpiresAt ? Date.parse(leaseExpiresAt) : NaN;
        // The lease's length as the broker counts it, from now: immune to a skewed local clock.
        if (!Number.isNaN(next)) this.#leaseExpiresAt = this.clock.now() + (next - (result.date ?? this.clock.now()));
        this.hooks.onHeartbeat?.(leaseExpiresAt ?? "");
        continue;
      }
      if (result.status === 410 || result.status === 409 || result.status === 403 || result.status === 401) {
        await this.#ended(describeAnswer(result));
        return;
      }
      // 429, 5xx: the broker is busy or restarting; it alone decides when the lease ends.
      failures++;
      this.hooks.onTrouble?.(`heartbeat: ${describeAnswer(result)}`);
    }
  }

  /** Finds out from the ticket why the admission ended, and aborts accordingly. */
  async #ended(answer: string): Promise<void> {
    let view: TicketView | null = null;
    for (let attempt = 0; attempt < 5 && !this.#stopped.signal.aborted; attempt++) {
      try {
        const r = await this.broker.getTicket(this.ticket, { signal: this.#stopped.signal });
        if (r.body) {
          view = r.body;
          break;
        }
        const again = await this.broker.getTicket(this.ticket, { bearer: this.admission, signal: this.#stopped.signal });
        if (again.body) {
          view = again.body;
          break;
        }
      } catch {
        /* try again */
      }
      await this.clock.sleep(1_000, this.#stopped.signal).catch(() => undefined);
    }
    if (this.#stopped.signal.aborted) return;
    abortFor(this.#controller, view, answer);
  }
}

/** Aborts `controller` with the error that explains why the ticket's admission is gone. */
export function abortFor(controller: AbortController, view: TicketView | null, answer: string): void {
  if (view?.state === "joined") return; // completed meanwhile: nothing to stop
  if (view?.state === "revoked") {
    controller.abort(
      new AdmissionRevoked(
        `an admin revoked this node's admission${view.reason ? ` (${view.reason})` : ""}; to ask for a new place in the queue, run again with --retry-revoked`,
      ),
    );
    return;
  }
  if (view?.state === "admitted") {
    // The ticket is admitted under a newer token (this one was superseded): start over with it.
    controller.abort(new LeaseLost("superseded", `the admission token was replaced (${answer})`));
    return;
  }
  controller.abort(
    new LeaseLost(view?.state ?? "unknown", `the admission ended: ${view ? `ticket ${view.state}${view.reason ? ` (${view.reason})` : ""}` : answer}`),
  );
}
