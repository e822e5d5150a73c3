/**
 * Which admission added which learner, and which certificates were signed for it, kept in etcd
 * beside the members themselves: every join API instance (one per controller, each with its own
 * memory, any of them restarted) can then ask the broker about a learner another instance added,
 * instead of taking it for a stranger, and tell which certificates to revoke when it goes.
 *
 *   /join-broker/learners/<peer URL>   a learner's admission (node, jti, token) and certificates,
 *                                      written before the add, in the same write as before
 *   /join-broker/members/<member ID>   a voter's certificates: the learner's record becomes this
 *                                      one in the write that deleted it (at promotion)
 *   /join-broker/revoked/<serial>      a certificate on the revocation list, until it expires
 *
 * A learner that goes (its admission ended, or nobody vouched for it) takes its record with it,
 * and its certificates onto the revocation list, in one transaction. The value holds the
 * admission token: it only authorizes its own node and peer URL until it expires, and whoever
 * reads etcd controls the cluster anyway (with auth on, only root reads these keys).
 * @module
 */
import { canonicalPeerUrl } from "../../shared/protocol/identifiers.ts";
import { memberIdHex } from "../../shared/protocol/member-id.ts";
import type { CallBound, EtcdGateway, EtcdResult, TxnOp } from "../etcd/gateway.ts";
import { RECORDS_PREFIX } from "../pki/etcd-identities.ts";

export { RECORDS_PREFIX };
export const LEARNER_RECORD_PREFIX = `${RECORDS_PREFIX}learners/`;
export const MEMBER_RECORD_PREFIX = `${RECORDS_PREFIX}members/`;
export const REVOKED_PREFIX = `${RECORDS_PREFIX}revoked/`;

/** A certificate the join API (or the bootstrap node) signed: its serial (hex) and when it ends (ms). */
export interface CertificateEntry {
  serial: string;
  notAfter: number;
  /** The admission it was signed under (none for the bootstrap node's own). */
  jti?: string;
}

export interface LearnerRecord {
  node: string;
  peerURL: string;
  jti: string;
  token: string;
  certificates?: CertificateEntry[];
}

/** A voter's certificates, kept until its member is gone. */
export interface MemberRecord {
  node: string;
  peerURL: string;
  memberID: string;
  certificates: CertificateEntry[];
}

/** A revoked certificate: on the revocation list until `notAfter`. */
export interface RevokedEntry {
  serial: string;
  node: string;
  peerURL: string;
  notAfter: number;
  /** Why: the admission ended, the member was removed… */
  reason: string;
  revokedAt: number;
}

export function learnerRecordKey(peerURL: string): string {
  return `${LEARNER_RECORD_PREFIX}${encodeURIComponent(canonicalPeerUrl(peerURL))}`;
}

export function memberRecordKey(memberID: string): string {
  return `${MEMBER_RECORD_PREFIX}${memberIdHex(memberID)}`;
}

export function revokedKey(serial: string): string {
  return `${REVOKED_PREFIX}${serial.toLowerCase()}`;
}

/** The writes that put these certificates on the revocation list. */
export function revocations(entries: readonly CertificateEntry[], who: { node: string; peerURL: string }, reason: string, now: number): TxnOp[] {
  return entries.map((e) => ({
    put: { key: revokedKey(e.serial), value: JSON.stringify({ serial: e.serial.toLowerCase(), node: who.node, peerURL: who.peerURL, notAfter: e.notAfter, reason, revokedAt: now } satisfies RevokedEntry) },
  }));
}

export class LearnerRecords {
  readonly #gateway: EtcdGateway;
  readonly #now: () => number;

  constructor(gateway: EtcdGateway, now: () => number = Date.now) {
    this.#gateway = gateway;
    this.#now = now;
  }

  /**
   * Writes the record unless etcd holds this very one already. An add held while etcd refuses
   * changes runs again every few hundred milliseconds; a write each time would put dozens of
   * entries in the raft log per join, and on etcd 3.6+ a log past 100 entries sends every new
   * member a snapshot, whose first publish then waits out etcd's 7 s request timeout.
   *
   * `again`: the learner exists already (its node asks again): the certificates signed for it
   * before stay its own, beside the new ones. Otherwise a record left behind for this peer URL
   * belongs to a learner that is gone: its certificates are revoked in the same write.
   */
  async save(record: LearnerRecord, bound: CallBound & { again?: boolean } = {}): Promise<EtcdResult<null>> {
    const peerURL = canonicalPeerUrl(record.peerURL);
    const key = learnerRecordKey(peerURL);
    const current = await this.#gateway.get(key, bound);
    const previous = current.ok && current.value !== null ? parse(current.value) : null;
    const kept = bound.again ? (previous?.certificates ?? []) : [];
    const certificates = merge(kept, record.certificates ?? []);
    const value = JSON.stringify({ node: record.node, peerURL, jti: record.jti, token: record.token, ...(certificates.length ? { certificates } : {}) });
    if (current.ok && current.value === value) return { ok: true, value: null, endpoint: current.endpoint };
    const gone = !bound.again && previous?.certificates?.length ? revocations(previous.certificates, previous, "its learner is gone", this.#now()) : [];
    if (gone.length === 0) return this.#gateway.put(key, value, bound);
    const written = await this.#gateway.txn([{ put: { key, value } }, ...gone], bound);
    return written.ok ? { ok: true, value: null, endpoint: written.endpoint } : written;
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

  /**
   * The learner is gone (removed): its record goes, and its certificates onto the revocation
   * list, in one write. Best effort: a record left behind names a peer URL no learner has; the
   * next add for it, or the revocation sweep, revokes its certificates then.
   */
  async forget(peerURLs: readonly string[], reason: string): Promise<void> {
    for (const url of peerURLs) {
      const key = learnerRecordKey(url);
      const got = await this.#gateway.get(key);
      const record = got.ok && got.value !== null ? parse(got.value) : null;
      const revoked = record?.certificates?.length ? revocations(record.certificates, record, reason, this.#now()) : [];
      if (revoked.length) await this.#gateway.txn([{ delete: { key } }, ...revoked]);
      else await this.#gateway.delete(key);
    }
  }

  /**
   * The learner is a voter now: its record becomes the member's (its certificates stay valid
   * while the member lives), in the one write that deleted it before.
   */
  async promoted(peerURL: string, memberID: string): Promise<void> {
    const key = learnerRecordKey(peerURL);
    const got = await this.#gateway.get(key);
    const record = got.ok && got.value !== null ? parse(got.value) : null;
    if (!record?.certificates?.length) {
      await this.#gateway.delete(key);
      return;
    }
    const member: MemberRecord = { node: record.node, peerURL: canonicalPeerUrl(record.peerURL), memberID, certificates: record.certificates };
    await this.#gateway.txn([{ delete: { key } }, { put: { key: memberRecordKey(memberID), value: JSON.stringify(member) } }]);
  }
}

/** Certificate entries of both lists, each serial once. */
function merge(a: readonly CertificateEntry[], b: readonly CertificateEntry[]): CertificateEntry[] {
  const out = [...a];
  for (const e of b) if (!out.some((o) => o.serial.toLowerCase() === e.serial.toLowerCase())) out.push(e);
  return out;
}

export function parse(text: string): LearnerRecord | null {
  try {
    const r = JSON.parse(text) as Partial<LearnerRecord>;
    if (typeof r.node !== "string" || typeof r.peerURL !== "string" || typeof r.jti !== "string" || typeof r.token !== "string") return null;
    return { node: r.node, peerURL: r.peerURL, jti: r.jti, token: r.token, ...(Array.isArray(r.certificates) ? { certificates: r.certificates.filter(isEntry) } : {}) };
  } catch {
    return null;
  }
}

export function parseMemberRecord(text: string): MemberRecord | null {
  try {
    const r = JSON.parse(text) as Partial<MemberRecord>;
    if (typeof r.node !== "string" || typeof r.peerURL !== "string" || typeof r.memberID !== "string" || !Array.isArray(r.certificates)) return null;
    return { node: r.node, peerURL: r.peerURL, memberID: r.memberID, certificates: r.certificates.filter(isEntry) };
  } catch {
    return null;
  }
}

export function parseRevoked(text: string): RevokedEntry | null {
  try {
    const r = JSON.parse(text) as Partial<RevokedEntry>;
    if (typeof r.serial !== "string" || !/^[0-9a-f]{1,40}$/.test(r.serial) || typeof r.notAfter !== "number") return null;
    return { serial: r.serial, node: String(r.node ?? ""), peerURL: String(r.peerURL ?? ""), notAfter: r.notAfter, reason: String(r.reason ?? ""), revokedAt: Number(r.revokedAt ?? 0) };
  } catch {
    return null;
  }
}

function isEntry(e: unknown): e is CertificateEntry {
  const x = e as Partial<CertificateEntry>;
  return typeof x?.serial === "string" && /^[0-9a-fA-F]{1,40}$/.test(x.serial) && typeof x.notAfter === "number";
}
