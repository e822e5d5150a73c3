/**
 * The agent's conversation with the broker, step by step: take up the ticket it holds or ask for
 * one, wait its turn on long polls, report completion, leave the queue. Every call goes through
 * one retry rule: transport errors, 429 and 5xx are "not now" (backoff, Retry-After honoured), a
 * 500 that repeats is a fault to report, not a wait.
 * @module
 */
import { describeAnswer, type HttpResult } from "../../../shared/client/exchange.ts";
import type { NodeSession } from "../../../shared/client/node-session.ts";
import { memberIdHex } from "../../../shared/protocol/member-id.ts";
import type { QueuedTicket, TicketView } from "../../../shared/protocol/wire.ts";
import type { Admission } from "./admission.ts";
import { UsageError } from "../../exit-codes.ts";
import { GaveUp, Refusal } from "../core/errors.ts";
import type { AgentOptions } from "../core/agent-options.ts";
import { LeaseLost, abortFor } from "../core/lease.ts";
import type { Reporter } from "../core/progress.ts";
import { reportQueued } from "../core/queue-report.ts";
import { Backoff, ServerFailures, retrying, sleep, type Random } from "../core/retry.ts";

/**
 * A view as the agent takes it from the wire. The contract gives an admitted ticket its
 * admission token, and the types count on it: one without is no admission to join with.
 */
function checked(view: TicketView): TicketView {
  if (view.state === "admitted" && typeof view.admission !== "string")
    throw new LeaseLost("admitted", "the broker sent an admitted ticket without its admission token");
  return view;
}

const LONG_POLL_MIN_SECONDS = 2;
const LONG_POLL_DEFAULT_SECONDS = 10;
const LONG_POLL_MAX_SECONDS = 30;
/** A queued poll answered sooner than this was not held by the broker. */
const MIN_HELD_MS = 100;

/** First in the queue: the next admission is this node's (whatever it waits for: a slot, the bootstrap, a resume). */
function nextInLine(view: QueuedTicket): boolean {
  return view.position === 1;
}

export class BrokerSteps {
  readonly #broker: NodeSession;
  readonly #o: AgentOptions;
  readonly #r: Reporter;
  readonly #random: Random;

  /**
   * @param exclusiveUntilStarted asks the broker to admit nobody beside this node until its member
   *   started (gate mode: the installer adds its own member).
   */
  constructor(
    broker: NodeSession,
    options: AgentOptions,
    reporter: Reporter,
    random: Random,
    readonly exclusiveUntilStarted = false,
  ) {
    this.#broker = broker;
    this.#o = options;
    this.#r = reporter;
    this.#random = random;
  }

  /**
   * The live ticket this node already holds, read back after a restart. A revoked one is returned
   * too, so that an admin's revocation is not undone by restarting the agent (unless
   * --retry-revoked). For anything else the idempotent POST decides: null.
   */
  async resumeTicket(ticket: string | undefined, signal: AbortSignal): Promise<TicketView | null> {
    if (!ticket) return null;
    const res = await this.retry("reading the ticket", () => this.#broker.getTicket(ticket, { signal }), signal);
    if (!res.body) return null;
    const view = checked(res.body);
    const live = view.state === "queued" || view.state === "admitted";
    if (!live && !(view.state === "revoked" && !this.#o.retryRevoked)) return null;
    this.#r.event("ticket", `resuming ticket ${view.ticket}: ${view.state} (${view.role})`, { ticket: view.ticket, state: view.state, role: view.role });
    return view;
  }

  async requestTicket(signal: AbortSignal): Promise<TicketView> {
    const { node, peerURL } = this.#o;
    const exclusiveUntilStarted = this.exclusiveUntilStarted;
    const res = await this.retry("requesting a ticket", () => this.#broker.requestTicket(node, peerURL, signal, { exclusiveUntilStarted }), signal);
    if (res.body && res.status >= 200 && res.status < 300) {
      const view = checked(res.body);
      this.#r.event("ticket", `ticket ${view.ticket}: ${view.state} (${view.role})`, { ticket: view.ticket, state: view.state, role: view.role });
      return view;
    }
    const why = describeAnswer(res);
    if (res.status === 400) throw new UsageError(`the broker rejected this node's ticket request: ${why}`);
    if (res.status === 409) throw new Refusal(`the broker refused the ticket: ${why}`);
    if (res.problem?.code === "unknown_cluster")
      throw new Refusal(
        `the broker has no cluster ${this.#o.cluster}: check --cluster (or JOIN_BROKER_CLUSTER) against the cluster the enrollment token was created for; 'join-broker admin clusters' lists them (${why})`,
      );
    if (res.status === 401 || res.status === 403 || res.status === 404) throw new Refusal(`the broker refused the enrollment token: ${why}`);
    throw new Error(`unexpected answer to the ticket request: ${why}`);
  }

  /** Long polls until the ticket leaves the queue. */
  async waitInQueue(start: TicketView, signal: AbortSignal): Promise<TicketView> {
    let view = start;
    const backoff = new Backoff(500, 10_000, this.#random);
    const faults = new ServerFailures(undefined, undefined, undefined, this.#random);
    let shown: TicketView | null = null;
    const onUnreachable = (reason: string) => this.#r.failure("broker", `broker unreachable: ${reason}`);
    return retrying<TicketView>({ backoff, signal, onUnreachable }, async () => {
      if (view.state !== "queued") return { done: view };
      if (view !== shown) reportQueued(this.#r, view);
      const began = performance.now();
      // Hold the poll for the broker's Retry-After (plus jitter): an admission still answers at
      // once, and the position shown is never older than the broker thinks useful.
      const hint = view.retryAfter ?? LONG_POLL_DEFAULT_SECONDS;
      const wait = Math.min(LONG_POLL_MAX_SECONDS, Math.max(LONG_POLL_MIN_SECONDS, Math.round(hint * (1 + 0.25 * this.#random()))));
      const res = await this.#broker.getTicket(view.ticket, { waitSeconds: wait, signal });
      if (res.status === 500) {
        await this.#fault("waiting in the queue", res, faults, signal);
        return { again: true };
      }
      faults.reset();
      if (res.body) {
        this.#r.reachable("broker");
        backoff.reset();
        view = checked(res.body);
        // A poll that came back early (the ticket changed but is still queued) must not bring the
        // next request forward: requests stay at least Retry-After apart, plus jitter. Except next
        // in line: its next change is its own admission, which a poll held at the broker hears at
        // once (one request either way), while a sleep would hear it late. A poll answered at once
        // (a broker that does not hold it) never counts as held.
        const held = performance.now() - began;
        const early = hint * 1000 - held;
        if (view.state === "queued" && early > 0) {
          // Show the new position at once, whenever the next request goes.
          reportQueued(this.#r, view);
          shown = view;
          if (!(nextInLine(view) && held >= MIN_HELD_MS)) await sleep(early + hint * 250 * this.#random(), signal);
        }
        return { again: true };
      }
      if (res.status === 404) return { done: await this.requestTicket(signal) };
      if (res.status === 401 || res.status === 403) throw new Refusal(`the broker refused the enrollment token: ${describeAnswer(res)}`);
      this.#r.failure("broker", `waiting in the queue: ${describeAnswer(res)}`);
      return { wait: res.retryAfter };
    });
  }

  /**
   * Tells the broker this node's etcd member started, once: true when the broker took note. One
   * request, not retried here: the caller asks again on its next poll, and until then the next
   * node only waits longer.
   */
  async reportStarted({ ticket, signal }: Admission, memberID: string): Promise<boolean> {
    let res: Awaited<ReturnType<NodeSession["memberStarted"]>>;
    try {
      res = await this.#broker.memberStarted(ticket.ticket, ticket.admission, memberID, signal);
    } catch (e) {
      // A broker out of reach (a connection it closed, say) is asked again at the next poll: the
      // join goes on meanwhile, only the next node waits longer. The admission's end is not.
      if (signal.aborted) throw e;
      this.#r.failure("broker", `reporting member ${memberIdHex(memberID)} started: ${e instanceof Error ? e.message : String(e)}`);
      return false;
    }
    if (res.status === 200) {
      this.#r.event("member-started", `told the broker that member ${memberIdHex(memberID)} started: the next node may be admitted`, { memberID });
      return true;
    }
    this.#r.failure("broker", `reporting member ${memberIdHex(memberID)} started: ${describeAnswer(res)}`);
    return false;
  }

  /**
   * Tells the broker that this node gives up its admission leaving member `memberID` in etcd
   * (it could not remove it): the broker ends the ticket and pauses the cluster for an operator.
   * A few tries, 30 s at most (the agent is on its way out); true when the broker took note.
   */
  async reportStuck({ ticket }: Admission, memberID: string, detail: string): Promise<boolean> {
    const until = AbortSignal.timeout(30_000);
    const backoff = new Backoff(1_000, 5_000, this.#random);
    while (!until.aborted) {
      const res = await this.#broker.memberStuck(ticket.ticket, ticket.admission, memberID, detail, until).catch(() => null);
      if (res?.status === 200) {
        this.#r.event("stuck", `told the broker that member ${memberIdHex(memberID)} is left in etcd for an operator: it paused the cluster`, { memberID });
        return true;
      }
      if (res && res.status < 500 && res.status !== 429) {
        this.#r.failure("broker", `reporting member ${memberIdHex(memberID)} left for an operator: ${describeAnswer(res)}`);
        return false;
      }
      await sleep(backoff.next(), until).catch(() => undefined);
    }
    return false;
  }

  async complete({ ticket: view, signal }: Admission, memberID: string): Promise<void> {
    this.#r.event("complete", `reporting member ${memberIdHex(memberID)} to the broker`, { memberID });
    const res = await this.retry("completing", () => this.#broker.complete(view.ticket, view.admission, memberID, signal), signal);
    if (res.status === 200) return;
    if (res.status === 410 || (res.status === 409 && res.problem?.code === "not_admitted")) {
      const now = await this.retry("reading the ticket", () => this.#broker.getTicket(view.ticket, { signal }), signal);
      if (now.body?.state === "joined") return;
      const controller = new AbortController();
      abortFor(controller, now.body, describeAnswer(res));
      throw controller.signal.aborted ? controller.signal.reason : new LeaseLost("unknown", describeAnswer(res));
    }
    throw new Refusal(`the broker refused the completion: ${describeAnswer(res)}`);
  }

  /** Calls the broker until it answers something other than "not now" (transport errors, 429, 5xx). */
  async retry<T>(what: string, call: () => Promise<HttpResult<T>>, signal: AbortSignal): Promise<HttpResult<T>> {
    const backoff = new Backoff(500, 10_000, this.#random);
    const faults = new ServerFailures(undefined, undefined, undefined, this.#random);
    const onUnreachable = (reason: string) => this.#r.failure("broker", `${what}: broker unreachable (${reason})`);
    return retrying<HttpResult<T>>({ backoff, signal, onUnreachable }, async () => {
      const res = await call();
      if (res.status === 500) {
        await this.#fault(what, res, faults, signal);
        return { again: true };
      }
      faults.reset();
      if (res.status !== 429 && res.status < 500) {
        this.#r.reachable("broker");
        return { done: res };
      }
      this.#r.failure("broker", `${what}: ${describeAnswer(res)}`, { status: res.status, retryAfter: res.retryAfter });
      return { wait: res.retryAfter };
    });
  }

  /** A 500 from the broker: reported every time, backed off from, and given up on when it repeats. */
  async #fault(what: string, res: HttpResult<unknown>, faults: ServerFailures, signal: AbortSignal): Promise<void> {
    const delay = faults.failed();
    const correlation = typeof res.problem?.correlationId === "string" ? ` (correlation id ${res.problem.correlationId})` : "";
    if (delay === null) {
      throw new GaveUp(
        `${what}: the broker failed with an internal error ${faults.count} times in a row${correlation}: ${describeAnswer(res)}. ` +
          `This is a fault in the broker, not a wait: report it to the broker's operator with the correlation id, then run the agent again.`,
      );
    }
    this.#r.event(
      "broker-error",
      `${what}: the broker failed with an internal error${correlation} (${faults.count} in a row); trying again in ${Math.round(delay / 1000)} s`,
      {
        status: res.status,
        attempt: faults.count,
      },
    );
    await sleep(delay, signal);
  }

  /**
   * Leaves the queue (abandons the ticket), so that the slot it holds is free at once rather than
   * when its lease ends; the note for the message, or "" when that did not happen.
   */
  async leave(ticket: string | undefined): Promise<string> {
    if (!ticket) return "";
    try {
      const res = await this.#broker.abandon(ticket, undefined, AbortSignal.timeout(5_000));
      return res.status === 200 && res.body?.state === "abandoned" ? `; left the queue (ticket ${ticket} abandoned)` : "";
    } catch {
      return "";
    }
  }
}
