/**
 * The controllers' join API (docs/protocol.md, "Controllers' join API") as the agent calls it, with
 * the node's admission token as the bearer.
 * @module
 */
import { requestJson, type HttpResult } from "../../../shared/client/exchange.ts";
import type { CertificateRequests, MemberAdded, MemberPromoted } from "../../../shared/protocol/join-api.ts";

export type { MemberAdded, MemberPromoted };

export class JoinApiClient {
  readonly #base: string;

  constructor(
    joinApiUrl: string,
    readonly timeoutMs = 30_000,
    readonly fetch?: typeof globalThis.fetch,
  ) {
    this.#base = `${joinApiUrl.replace(/\/+$/, "")}/v1beta1/etcd/members`;
  }

  /** Adds this node as a learner (idempotent for the same peer). */
  addMember(admission: string, node: string, peerAddress: string, signal?: AbortSignal, csrs?: CertificateRequests): Promise<HttpResult<MemberAdded>> {
    return requestJson<MemberAdded>(this.#base, {
      method: "POST",
      bearer: admission,
      body: { node, peerAddress, ...(csrs ? { csrs } : {}) },
      timeoutMs: this.timeoutMs,
      signal,
      fetch: this.fetch,
    });
  }

  /** Promotes this node's learner to a voter; 503 + Retry-After while it is not started or not in sync. */
  promote(admission: string, node: string, signal?: AbortSignal): Promise<HttpResult<MemberPromoted>> {
    return requestJson<MemberPromoted>(`${this.#base}/promote`, {
      method: "POST",
      bearer: admission,
      body: { node },
      timeoutMs: this.timeoutMs,
      signal,
      fetch: this.fetch,
    });
  }
}
