/**
 * Which admission added which learner, kept in etcd beside the members themselves: every join
 * API instance (one per controller, each with its own memory, any of them restarted) can then ask
 * the broker about a learner another instance added, instead of taking it for a stranger. One key
 * per canonical peer URL under `/join-broker/learners/`, naming the member it was written for.
 * The value holds the admission token: it only authorizes its own node and peer URL until it
 * expires, and whoever reads etcd controls the cluster anyway.
 *
 * What it costs etcd is kept to one raft entry per admission, written after the add, never
 * before it and never after the promote: the record and the removal of those that served their
 * turn (members promoted since, learners removed) go in one transaction. A record is written
 * after its member exists, so it names the member ID and a record left over from an earlier
 * member with the same peer URL never speaks for a later one. (On etcd 3.6+ a raft log past 100
 * entries sends every new member a snapshot; see docs/etcd-versions.md.)
 * @module
 */
import { canonicalPeerUrl } from "../../shared/protocol/identifiers.ts";
import type { CallBound, EtcdGateway, EtcdMember, EtcdResult } from "../etcd/gateway.ts";

export const LEARNER_RECORD_PREFIX = "/join-broker/learners/";

export interface LearnerRecord {
  node: string;
  peerURL: string;
  jti: string;
  token: string;
  /** The member the record was written for (absent in records of join APIs before it was kept: they match any member). */
  memberID?: string;
}

export function learnerRecordKey(peerURL: string): string {
  return `${LEARNER_RECORD_PREFIX}${encodeURIComponent(canonicalPeerUrl(peerURL))}`;
}

/** The records etcd holds, by canonical peer URL; `of` finds a learner's own. */
export class RecordsRead {
  constructor(readonly byPeerUrl: ReadonlyMap<string, LearnerRecord>) {}

  /** This member's record: one of its peer URLs, written for this very member (or for no member in particular). */
  of(member: EtcdMember): LearnerRecord | null {
    for (const url of member.peerURLs) {
      const record = this.byPeerUrl.get(canonicalPeerUrl(url));
      if (record && (record.memberID === undefined || record.memberID === member.id)) return record;
    }
    return null;
  }
}

export class LearnerRecords {
  readonly #gateway: EtcdGateway;

  constructor(gateway: EtcdGateway) {
    this.#gateway = gateway;
  }

  /** Every record, in one read. */
  async read(bound: CallBound = {}): Promise<EtcdResult<RecordsRead>> {
    const got = await this.#gateway.getPrefix(LEARNER_RECORD_PREFIX, bound);
    if (!got.ok) return got;
    const byPeerUrl = new Map<string, LearnerRecord>();
    for (const value of got.value.values()) {
      const record = parse(value);
      if (record) byPeerUrl.set(canonicalPeerUrl(record.peerURL), record);
    }
    return { ok: true, value: new RecordsRead(byPeerUrl), endpoint: got.endpoint };
  }

  /**
   * Writes this learner's record and removes those of `done` (peer URLs whose learner was promoted
   * or removed), all in one transaction: one raft entry.
   */
  async write(record: LearnerRecord & { memberID: string }, done: readonly string[] = [], bound: CallBound = {}): Promise<EtcdResult<null>> {
    const peerURL = canonicalPeerUrl(record.peerURL);
    const key = learnerRecordKey(peerURL);
    const value = JSON.stringify({ node: record.node, peerURL, jti: record.jti, token: record.token, memberID: record.memberID });
    const stale = [...new Set(done.map(learnerRecordKey))].filter((k) => k !== key);
    return this.#gateway.writeAll([{ key, value }], stale, bound);
  }

  /** Writes the record unless etcd holds this very one already (a node asking again costs no write). */
  async keep(record: LearnerRecord & { memberID: string }, bound: CallBound = {}): Promise<EtcdResult<null>> {
    const peerURL = canonicalPeerUrl(record.peerURL);
    const value = JSON.stringify({ node: record.node, peerURL, jti: record.jti, token: record.token, memberID: record.memberID });
    const current = await this.#gateway.get(learnerRecordKey(peerURL), bound);
    if (current.ok && current.value === value) return { ok: true, value: null, endpoint: current.endpoint };
    return this.#gateway.writeAll([{ key: learnerRecordKey(peerURL), value }], [], bound);
  }
}

function parse(text: string): LearnerRecord | null {
  try {
    const r = JSON.parse(text) as Partial<LearnerRecord>;
    if (typeof r.node !== "string" || typeof r.peerURL !== "string" || typeof r.jti !== "string" || typeof r.token !== "string") return null;
    return { node: r.node, peerURL: r.peerURL, jti: r.jti, token: r.token, ...(typeof r.memberID === "string" ? { memberID: r.memberID } : {}) };
  } catch {
    return null;
  }
}
