/**
 * Which admission added which learner, and which certificates were signed for it, kept in etcd
 * beside the members themselves: every join API instance (one per controller, each with its own
 * memory, any of them restarted) can then ask the broker about a learner another instance added,
 * instead of taking it for a stranger, and tell which certificates to revoke when it goes.
 *
 *   /join-broker/learners/<peer URL>   a learner's admission (node, jti, token), the member it was
 *                                      written for, and its certificates: written right after the
 *                                      add, before any certificate is handed out
 *   /join-broker/members/<member ID>   a voter's certificates: its learner record becomes this one
 *                                      in the next add's write (until then the learner record,
 *                                      naming the member, stands for it)
 *   /join-broker/revoked/<serial>      a certificate on the revocation list, until it expires
 *
 * What it costs etcd is kept to one raft entry per admission, written after the add, never
 * before it and never at the promote: the learner's record (with the serials of the certificates
 * signed beside the add), the revocation of what a record left behind for its peer URL named, and
 * the records of learners promoted since becoming their members' records, in one transaction. A
 * record is written after its member exists, so it names the member ID: a record left over from
 * an earlier member with the same peer URL never speaks for a later one, and a record whose member
 * is gone from etcd's member list is known to be gone (ledger.ts). (On etcd 3.6+ a raft log past
 * 100 entries sends every new member a snapshot; see docs/etcd-versions.md.)
 *
 * A learner that is removed takes its record with it, and its certificates onto the revocation
 * list, in one transaction. The value holds the admission token: it only authorizes its own node
 * and peer URL until it expires, and whoever reads etcd controls the cluster anyway (with auth
 * on, only root reads these keys).
 * @module
 */
import { canonicalPeerUrl } from "../../shared/protocol/identifiers.ts";
import { memberIdHex } from "../../shared/protocol/member-id.ts";
import type { CallBound, EtcdGateway, EtcdMember, EtcdResult, TxnOp } from "../etcd/gateway.ts";
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
  /** The member the record was written for (absent in records of join APIs before it was kept: they match any member). */
  memberID?: string;
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
    put: {
      key: revokedKey(e.serial),
      value: JSON.stringify({
        serial: e.serial.toLowerCase(),
        node: who.node,
        peerURL: who.peerURL,
        notAfter: e.notAfter,
        reason,
        revokedAt: now,
      } satisfies RevokedEntry),
    },
  }));
}

/** The writes that make a promoted learner's record its member's: the learner record goes, the member record (if it names certificates) comes. */
export function promotion(record: LearnerRecord, memberID: string): TxnOp[] {
  const ops: TxnOp[] = [{ delete: { key: learnerRecordKey(record.peerURL) } }];
  if (record.certificates?.length) {
    const member: MemberRecord = { node: record.node, peerURL: canonicalPeerUrl(record.peerURL), memberID, certificates: record.certificates };
    ops.push({ put: { key: memberRecordKey(memberID), value: JSON.stringify(member) } });
  }
  return ops;
}

/** Whether a record speaks for this member: written for it, or for no member in particular (older records). */
export function recordIsFor(record: LearnerRecord, memberID: string): boolean {
  return record.memberID === undefined || record.memberID === memberID;
}

/** The records etcd holds, by canonical peer URL; `of` finds a learner's own. */
export class RecordsRead {
  constructor(readonly byPeerUrl: ReadonlyMap<string, LearnerRecord>) {}

  /** This member's record: one of its peer URLs, written for this very member (or for no member in particular). */
  of(member: EtcdMember): LearnerRecord | null {
    for (const url of member.peerURLs) {
      const record = this.byPeerUrl.get(canonicalPeerUrl(url));
      if (record && recordIsFor(record, member.id)) return record;
    }
    return null;
  }
}

type Written = LearnerRecord & { memberID: string };

export class LearnerRecords {
  readonly #gateway: EtcdGateway;
  readonly #now: () => number;

  constructor(gateway: EtcdGateway, now: () => number = Date.now) {
    this.#gateway = gateway;
    this.#now = now;
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
   * Writes the record of a learner just added, in one transaction (one raft entry) with:
   * - the revocation of the certificates a record left behind for its peer URL named (written for
   *   another member, one that is gone: the peer URL is this learner's now);
   * - the records of learners promoted since (voters in `members`) becoming their members' records.
   * `before`: the records as read while the add was made (the learner's own is not among them).
   */
  async write(record: Written, before: RecordsRead, members: readonly EtcdMember[], bound: CallBound = {}): Promise<EtcdResult<null>> {
    const peerURL = canonicalPeerUrl(record.peerURL);
    const ops: TxnOp[] = [{ put: { key: learnerRecordKey(peerURL), value: serialize({ ...record, peerURL }) } }];
    const left = before.byPeerUrl.get(peerURL);
    if (left && left.memberID !== record.memberID && left.certificates?.length)
      ops.push(...revocations(left.certificates, left, "its learner is gone", this.#now()));
    for (const member of members) {
      if (member.isLearner) continue;
      const promoted = before.of(member);
      if (promoted && canonicalPeerUrl(promoted.peerURL) !== peerURL) ops.push(...promotion(promoted, member.id));
    }
    const written = await this.#gateway.txn(ops, bound);
    return written.ok ? { ok: true, value: null, endpoint: written.endpoint } : written;
  }

  /**
   * Writes the record of a learner that exists already (its node asks again) unless etcd holds
   * this very one: a node asking again costs no write. The certificates recorded for this member
   * before stay its own, beside the new ones; a record written for another member (gone: the peer
   * URL is this one's) has its certificates revoked in the same write.
   */
  async keep(record: Written, bound: CallBound = {}): Promise<EtcdResult<null>> {
    const peerURL = canonicalPeerUrl(record.peerURL);
    const key = learnerRecordKey(peerURL);
    const current = await this.#gateway.get(key, bound);
    if (!current.ok) return current;
    const previous = current.value !== null ? parse(current.value) : null;
    const same = previous !== null && recordIsFor(previous, record.memberID);
    const certificates = merge(same ? (previous.certificates ?? []) : [], record.certificates ?? []);
    const value = serialize({ ...record, peerURL, certificates });
    if (current.value === value) return { ok: true, value: null, endpoint: current.endpoint };
    const gone = !same && previous?.certificates?.length ? revocations(previous.certificates, previous, "its learner is gone", this.#now()) : [];
    const written = await this.#gateway.txn([{ put: { key, value } }, ...gone], bound);
    return written.ok ? { ok: true, value: null, endpoint: written.endpoint } : written;
  }

  /**
   * The learner is gone (removed): its record goes, and its certificates onto the revocation
   * list, in one write. Best effort: a record left behind names a member etcd no longer lists;
   * the next add for its peer URL, or the revocation sweep, revokes its certificates then.
   */
  async forget(peerURLs: readonly string[], reason: string): Promise<void> {
    for (const url of peerURLs) {
      const key = learnerRecordKey(url);
      const got = await this.#gateway.get(key);
      if (!got.ok || got.value === null) continue;
      const record = parse(got.value);
      const revoked = record?.certificates?.length ? revocations(record.certificates, record, reason, this.#now()) : [];
      if (revoked.length) await this.#gateway.txn([{ delete: { key } }, ...revoked]);
      else await this.#gateway.delete(key);
    }
  }
}

function serialize(r: Written): string {
  const certificates = r.certificates ?? [];
  return JSON.stringify({
    node: r.node,
    peerURL: r.peerURL,
    jti: r.jti,
    token: r.token,
    memberID: r.memberID,
    ...(certificates.length ? { certificates } : {}),
  });
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
    return {
      node: r.node,
      peerURL: r.peerURL,
      jti: r.jti,
      token: r.token,
      ...(typeof r.memberID === "string" ? { memberID: r.memberID } : {}),
      ...(Array.isArray(r.certificates) ? { certificates: r.certificates.filter(isEntry) } : {}),
    };
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
    return {
      serial: r.serial,
      node: String(r.node ?? ""),
      peerURL: String(r.peerURL ?? ""),
      notAfter: r.notAfter,
      reason: String(r.reason ?? ""),
      revokedAt: Number(r.revokedAt ?? 0),
    };
  } catch {
    return null;
  }
}

function isEntry(e: unknown): e is CertificateEntry {
  const x = e as Partial<CertificateEntry>;
  return typeof x?.serial === "string" && /^[0-9a-fA-F]{1,40}$/.test(x.serial) && typeof x.notAfter === "number";
}
