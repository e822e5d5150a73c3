/**
 * The agent's conversation with the join API: add this node as a learner (with its certificate
 * requests, etcd on TLS) and promote it once its etcd serves. Both go through one retry rule;
 * a rejected admission is checked with the broker before it counts, and a join API out of reach
 * for `--join-api-patience` gives the slot back rather than hold it.
 * @module
 */
import { describeAnswer, type HttpResult } from "../../../shared/client/exchange.ts";
import type { NodeSession } from "../../../shared/client/node-session.ts";
import type { Admission } from "../steps/admission.ts";
import type { BrokerSteps } from "../steps/broker-steps.ts";
import { JoinApiOutOfReach, Refusal } from "../core/errors.ts";
import type { JoinApiClient, MemberAdded, MemberPromoted } from "./join-api-client.ts";
import type { AgentOptions } from "../core/agent-options.ts";
import { LeaseLost, abortFor } from "../core/lease.ts";
import type { LocalEtcd } from "../local-etcd/local-etcd.ts";
import { certificatesToRequest, saveCertificates, type NodeKeys } from "../local-etcd/node-certificates.ts";
import type { Reporter } from "../core/progress.ts";
import { Backoff, retrying, type Random, type RetryOptions } from "../core/retry.ts";

/** The join API rejecting an admission the broker calls active this often means it really refuses. */
const MAX_JOIN_API_REJECTIONS = 5;

export class JoinApiSteps {
  readonly #client: JoinApiClient;
  readonly #brokerSteps: BrokerSteps;
  readonly #broker: NodeSession;
  readonly #etcd: LocalEtcd;
  readonly #o: AgentOptions;
  readonly #r: Reporter;
  readonly #random: Random;
  readonly #keys: NodeKeys;

  constructor(
    client: JoinApiClient,
    brokerSteps: BrokerSteps,
    broker: NodeSession,
    etcd: LocalEtcd,
    options: AgentOptions,
    reporter: Reporter,
    random: Random,
    keys: NodeKeys,
  ) {
    this.#client = client;
    this.#brokerSteps = brokerSteps;
    this.#broker = broker;
    this.#etcd = etcd;
    this.#o = options;
    this.#r = reporter;
    this.#random = random;
    this.#keys = keys;
  }

  async addMember(admission: Admission): Promise<MemberAdded> {
    try {
      return await this.#addMemberOnce(admission);
    } catch (e) {
      if (!(e instanceof JoinApiOutOfReach)) throw e;
      // Nothing was added: give the turn to the next node rather than hold it while this one cannot be helped.
      const left = await this.#brokerSteps.leave(admission.ticket.ticket);
      throw new LeaseLost("join_api_unreachable", `${e.message}${left || "; giving the slot back"}`);
    }
  }

  async #addMemberOnce(admission: Admission): Promise<MemberAdded> {
    const { ticket, signal } = admission;
    let rejected = 0;
    let unreachableSince: number | null = null;
    const patienceMs = this.#o.joinApiPatienceSeconds * 1000;
    const retry = this.#joinApiRetry(10_000, signal);
    const onUnreachable = (reason: string) => {
      retry.onUnreachable(reason);
      unreachableSince ??= performance.now();
      if (performance.now() - unreachableSince >= patienceMs)
        throw new JoinApiOutOfReach(
          `the join API ${this.#o.joinApiUrl} could not be reached for ${this.#o.joinApiPatienceSeconds} s (--join-api-patience; last: ${reason})`,
        );
    };
    // Keys made for this node (while it waited), kept in memory until their certificates arrive:
    // a node that stops before then makes fresh ones when it asks again.
    const pending = await certificatesToRequest(this.#o, this.#keys);
    return retrying<MemberAdded>({ ...retry, onUnreachable }, async () => {
      const res = await this.#client.addMember(ticket.admission, this.#o.node, this.#o.peerURL, signal, pending?.requests);
      this.#r.reachable("join-api");
      unreachableSince = null;
      const body = res.body;
      if (res.status === 200 && body && typeof body.memberID === "string" && Array.isArray(body.initialCluster)) {
        if (pending) await saveCertificates(this.#o, this.#r, pending, body);
        return { done: body };
      }
      if (res.status === 401 || res.status === 403 || res.status === 410) {
        rejected = await this.#joinApiRejected(admission, res, rejected);
      } else if (res.status === 400 || res.status === 409 || res.status === 422) {
        throw new Refusal(`the join API refused to add ${this.#o.node}: ${describeAnswer(res)}`);
      } else {
        this.#r.retry(`adding the member: ${describeAnswer(res)}`, { status: res.status, retryAfter: res.retryAfter });
      }
      return { wait: res.retryAfter };
    });
  }

  async promote(admission: Admission): Promise<MemberPromoted> {
    const { ticket, signal } = admission;
    let rejected = 0;
    return retrying<MemberPromoted>(this.#joinApiRetry(5_000, signal), async () => {
      await this.#etcd.check();
      const res = await this.#client.promote(ticket.admission, this.#o.node, signal);
      this.#r.reachable("join-api");
      if (res.status === 200 && res.body) {
        if (res.body.learner === false) this.#etcd.markVoter();
        return { done: res.body };
      }
      if (res.status === 404 && res.problem?.code === "member_not_found") {
        await this.#etcd.discardLearnerData(describeAnswer(res));
        throw new LeaseLost("member_removed", `this node's learner is no longer an etcd member (${describeAnswer(res)}); joining again`);
      }
      if (res.status === 401 || res.status === 403 || res.status === 410) {
        rejected = await this.#joinApiRejected(admission, res, rejected);
      } else if (res.status === 400 || res.status === 409 || res.status === 422) {
        throw new Refusal(`the join API refused to promote ${this.#o.node}: ${describeAnswer(res)}`);
      } else {
        this.#r.retry(`promoting: ${describeAnswer(res)}`, { status: res.status, retryAfter: res.retryAfter });
      }
      return { wait: res.retryAfter };
    });
  }

  #joinApiRetry(capMs: number, signal: AbortSignal): RetryOptions {
    return {
      backoff: new Backoff(500, capMs, this.#random),
      signal,
      onUnreachable: (reason) => this.#r.failure("join-api", `join API unreachable: ${reason}`),
    };
  }

  /**
   * The join API rejected the admission token: ask the broker why. A revoked or ended admission
   * stops this attempt; one the broker still calls active is retried a few times (the join API
   * may not have the newest signing key yet) before it counts as a refusal.
   */
  async #joinApiRejected({ ticket, signal }: Admission, answer: HttpResult<unknown>, rejected: number): Promise<number> {
    const res = await this.#brokerSteps.retry("checking the admission", () => this.#broker.getTicket(ticket.ticket, { signal }), signal);
    const current = res.body;
    if (current?.state !== "admitted" || current.admission !== ticket.admission) {
      const controller = new AbortController();
      abortFor(controller, current, describeAnswer(answer));
      if (controller.signal.aborted) throw controller.signal.reason;
      throw new LeaseLost(current?.state ?? "unknown", `the join API rejected the admission: ${describeAnswer(answer)}`);
    }
    if (rejected + 1 >= MAX_JOIN_API_REJECTIONS) throw new Refusal(`the join API keeps rejecting an active admission: ${describeAnswer(answer)}`);
    this.#r.retry(`the join API rejected an active admission (${describeAnswer(answer)}); trying again`);
    return rejected + 1;
  }
}
