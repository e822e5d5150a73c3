/**
 * Which admission added which learner, kept in etcd beside the members themselves: every join
 * API instance (one per controller, each with its own memory, any of them restarted) can then ask
 * the broker about a learner another instance added, instead of taking it for a stranger. One key
 * per canonical peer URL under `/join-broker/learners/`, written before the add and deleted once
 * the learner is promoted or removed. The value holds the admission token: it only authorizes
 * its own node and peer URL until it expires, and whoever reads etcd controls the cluster anyway.
 * @module
 */
import { canonicalPeerUrl } from "../../shared/protocol/identifiers.ts";
import type { CallBound, EtcdGateway, EtcdResult } from "../etcd/gateway.ts";

export const LEARNER_RECORD_PREFIX = "/join-broker/learners/";

export interface LearnerRecord {
  node: string;
  peerURL: string;
  jti: string;
  token: string;
}

export function learnerRecordKey(peerURL: string): string {
  return `${LEARNER_RECORD_PREFIX}${encodeURIComponent(canonicalPeerUrl(peerURL))}`;
}

export class LearnerRecords {
  readonly #gateway: EtcdGateway;

  constructor(gateway: EtcdGateway) {
    this.#gateway = gateway;
  }

  /**
   * Writes the record unless etcd holds this very one already. An add held while etcd refuses
   * changes runs again every few hundred milliseconds; a write each time would put dozens of
   * entries in the raft log per join, and on etcd 3.6+ a log past 100 entries sends every new
   * member a snapshot, whose first publish then waits out etcd's 7 s request timeout.
   */
  async save(record: LearnerRecord, bound: CallBound = {}): Promise<EtcdResult<null>> {
    const peerURL = canonicalPeerUrl(record.peerURL);
    const key = learnerRecordKey(peerURL);
    const value = JSON.stringify({ node: record.node, peerURL, jti: record.jti, token: record.token });
    const current = await this.#gateway.get(key, bound);
    if (current.ok && current.value === value) return { ok: true, value: null, endpoint: current.endpoint };
    return this.#gateway.put(key, value, bound);
  }

  /** The record of the first of these peer URLs that has one (null: none), or etcd's error. */
  async find(peerURLs: readonly string[]): Promise<EtcdResult<LearnerRecord | null>> {
    for (const url of peerURLs) {
      const got = await this.#gateway.get(learnerRecordKey(url));
      if (!got.ok) return got;
      const record = got.value === null ? null : parse(got.value);
      if (record) return { ok: true, value: record, endpoint: got.endpoint };
    }
    return { ok: true, value: null, endpoint: "" };
  }

  /** Best effort: a record left behind names a peer URL no learner has, and the next add overwrites it. */
  async forget(peerURLs: readonly string[]): Promise<void> {
    for (const url of peerURLs) await this.#gateway.delete(learnerRecordKey(url));
  }
}

function parse(text: string): LearnerRecord | null {
  try {
    const r = JSON.parse(text) as Partial<LearnerRecord>;
    return typeof r.node === "string" && typeof r.peerURL === "string" && typeof r.jti === "string" && typeof r.token === "string" ? { node: r.node, peerURL: r.peerURL, jti: r.jti, token: r.token } : null;
  } catch {
    return null;
  }
}
