/**
 * A node's session with the broker (docs/protocol.md, "Broker: node-facing"): ticket, long polls,
 * heartbeats, complete, abandon, each with the credential it needs (enrollment or admission
 * token). Every method returns the raw answer (`HttpResult`) instead of throwing on a 4xx/5xx:
 * the node agent decides what each status means. Part of the typed client
 * (`BrokerClient.nodeSession`).
 * @module
 */
import type { TicketView } from "../protocol/wire.ts";
import { requestJson, type HttpResult } from "./exchange.ts";

export type { TicketView };

/** Room on top of a long poll's `wait` for the answer to travel back. */
const LONG_POLL_SLACK_MS = 15_000;

export class NodeSession {
  readonly #base: string;

  constructor(
    brokerUrl: string,
    readonly cluster: string,
    readonly enrollmentToken: string,
    readonly timeoutMs = 20_000,
    readonly fetch?: typeof globalThis.fetch,
  ) {
    this.#base = `${brokerUrl.replace(/\/+$/, "")}/v1/clusters/${encodeURIComponent(cluster)}/tickets`;
  }

  /** POST …/tickets: idempotent per (cluster, node); 201 new and admitted, 202 queued, 200 existing. */
  requestTicket(node: string, peerURL: string, signal?: AbortSignal, options: { exclusiveUntilStarted?: boolean } = {}): Promise<HttpResult<TicketView>> {
    const body = { node, peerURL, ...(options.exclusiveUntilStarted ? { exclusiveUntilStarted: true } : {}) };
    return requestJson<TicketView>(this.#base, { method: "POST", bearer: this.enrollmentToken, body, timeoutMs: this.timeoutMs, signal, fetch: this.fetch });
  }

  /**
   * GET …/tickets/{ticket}?wait=S: held by the broker while the ticket is queued (or, with an
   * ETag, while it is unchanged), up to S seconds.
   */
  getTicket(
    ticket: string,
    options: { waitSeconds?: number; etag?: string | null; bearer?: string; signal?: AbortSignal } = {},
  ): Promise<HttpResult<TicketView>> {
    const wait = Math.max(0, Math.min(30, Math.round(options.waitSeconds ?? 0)));
    const url = `${this.#base}/${encodeURIComponent(ticket)}${wait > 0 ? `?wait=${wait}` : ""}`;
    return requestJson<TicketView>(url, {
      bearer: options.bearer ?? this.enrollmentToken,
      headers: options.etag ? { "if-none-match": options.etag } : undefined,
      timeoutMs: wait * 1000 + LONG_POLL_SLACK_MS,
      signal: options.signal,
      fetch: this.fetch,
    });
  }

  /** POST …/heartbeat with the admission token: extends the lease. */
  heartbeat(ticket: string, admission: string, signal?: AbortSignal): Promise<HttpResult<TicketView>> {
    return this.#onTicket("POST", ticket, "/heartbeat", admission, undefined, signal);
  }

  /** POST …/started {"memberID"}: the node's etcd member started (the start rule admits the next node). */
  memberStarted(ticket: string, admission: string, memberID: string, signal?: AbortSignal): Promise<HttpResult<TicketView>> {
    return this.#onTicket("POST", ticket, "/started", admission, { memberID }, signal);
  }

  /**
   * POST …/stuck {"memberID", "detail"}: this node gives up its admission leaving a member in etcd
   * that it could not remove; the broker ends the ticket and pauses the cluster for an operator.
   */
  memberStuck(ticket: string, admission: string, memberID: string, detail: string, signal?: AbortSignal): Promise<HttpResult<TicketView>> {
    return this.#onTicket("POST", ticket, "/stuck", admission, { memberID, detail }, signal);
  }

  /** POST …/complete {"memberID"}: the node is a started, promoted voter. */
  complete(ticket: string, admission: string, memberID: string, signal?: AbortSignal): Promise<HttpResult<TicketView>> {
    return this.#onTicket("POST", ticket, "/complete", admission, { memberID }, signal);
  }

  /** DELETE …/tickets/{ticket}: give up the place (or the slot). */
  abandon(ticket: string, bearer?: string, signal?: AbortSignal): Promise<HttpResult<TicketView>> {
    return this.#onTicket("DELETE", ticket, "", bearer ?? this.enrollmentToken, undefined, signal);
  }

  /** One call on a ticket (…/tickets/{ticket}ACTION), with `bearer` and a JSON body when one is given. */
  #onTicket(method: "POST" | "DELETE", ticket: string, action: string, bearer: string, body: unknown, signal?: AbortSignal): Promise<HttpResult<TicketView>> {
    return requestJson<TicketView>(`${this.#base}/${encodeURIComponent(ticket)}${action}`, {
      method,
      bearer,
      body,
      timeoutMs: this.timeoutMs,
      signal,
      fetch: this.fetch,
    });
  }
}
