/**
 * Which certificates the cluster's etcd must refuse, from state every join API instance can see
 * (etcd itself: the records of learner-records.ts and the member list), signed by the CA as a
 * revocation list that each node's agent fetches (`GET /v1beta1/etcd/crl`) and writes where its
 * etcd reads it (`--client-crl-file`, `--peer-crl-file`), on every new TLS connection.
 *
 * Every few seconds each instance sweeps:
 * - a voter's certificates whose member is gone from etcd's member list (`etcdctl member remove`,
 *   then `join-broker admin forget`) are revoked;
 * - a learner whose admission was revoked before it completed is removed (quorum-safe: learners
 *   do not vote), taking its certificates onto the list; a learner whose admission ended
 *   otherwise (its lease, abandoned, superseded) is left to the next add, as before, and its
 *   certificates go with it then;
 * - a learner's record whose member is gone from etcd's member list (it names the member it was
 *   written for, right after the add) has its certificates revoked, as does an older record (one
 *   naming no member) whose learner never came, or is gone, and whose admission ended;
 * - a learner's record whose member was promoted stands for the member's record (the next add's
 *   write makes it one): its certificates stay valid while the member lives;
 * - revocations past their certificate's end are dropped.
 * Nothing is written when nothing changed, and never in the path of an add: the learner's record
 * that names its certificates is the one the add writes anyway.
 * @module
 */
import { memberByPeerUrl, type EtcdGateway, type KeyValue, type TxnGuard, type TxnOp } from "../etcd/gateway.ts";
import { createRevocationList, type CertificateAuthority, type RevocationList } from "../pki/x509.ts";
import {
  LEARNER_RECORD_PREFIX,
  MEMBER_RECORD_PREFIX,
  RECORDS_PREFIX,
  REVOKED_PREFIX,
  parse,
  parseMemberRecord,
  parseRevoked,
  recordIsFor,
  revocations,
  type RevokedEntry,
} from "./learner-records.ts";
import type { AdmissionStatus, Membership } from "./members.ts";

/** How often each join API instance sweeps. With the agents' own 5 s, a revocation reaches etcd's files within about 10 s. */
export const SWEEP_MS = 5_000;
/** A list re-signed at least this often, even when nothing changed (its thisUpdate stays recent). */
const RESIGN_MS = 3_600_000;

export interface LedgerOptions {
  gateway: EtcdGateway;
  membership: Membership;
  ca: CertificateAuthority;
  admissionStatus(token: string, jti: string): Promise<AdmissionStatus | null>;
  log?: (line: string) => void;
  now?: () => number;
}

export class CertificateLedger {
  readonly #o: LedgerOptions;
  readonly #now: () => number;
  readonly #log: (line: string) => void;
  #list: RevocationList | null = null;
  #timer: ReturnType<typeof setInterval> | null = null;
  #running: Promise<void> | null = null;
  #lastProblem = "";

  constructor(options: LedgerOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    this.#log = options.log ?? (() => {});
  }

  /** The newest revocation list this instance signed, or null before its first sweep went through. */
  get current(): RevocationList | null {
    return this.#list;
  }

  start(intervalMs = SWEEP_MS): void {
    void this.sweep();
    this.#timer = setInterval(() => void this.sweep(), intervalMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#running;
  }

  /** One sweep (one at a time); its problem is logged once until it changes. */
  sweep(): Promise<void> {
    this.#running ??= this.#sweep()
      .then(
        () => {
          if (this.#lastProblem) this.#log("revocation sweep: etcd answers again");
          this.#lastProblem = "";
        },
        (e: unknown) => {
          const problem = e instanceof Error ? e.message : String(e);
          if (problem !== this.#lastProblem) this.#log(`revocation sweep failed (the last list stays served): ${problem}`);
          this.#lastProblem = problem;
        },
      )
      .finally(() => (this.#running = null));
    return this.#running;
  }

  async #sweep(): Promise<void> {
    const { gateway } = this.#o;
    const now = this.#now();
    // The records first, then the member list: a member whose record was read was added before
    // the list was, so it is missing from the list only when it is gone.
    const records = await gateway.range(RECORDS_PREFIX);
    if (!records.ok) throw new Error(`etcd's records: ${records.error.message}`);
    const list = await gateway.memberList();
    if (!list.ok) throw new Error(`etcd's member list: ${list.error.message}`);
    const members = list.value.members;
    const ops: TxnOp[] = [];
    // Each record deleted is deleted only as it was read: an add that rewrote it meanwhile (its
    // peer URL's new learner) wins, and the next sweep reads it again.
    const unchanged: TxnGuard[] = [];
    const drop = (kv: KeyValue) => {
      ops.push({ delete: { key: kv.key } });
      unchanged.push({ key: kv.key, modRevision: kv.modRevision });
    };
    const revoked = new Map<string, RevokedEntry>();
    const reaps: { peerURL: string; node: string; why: string; entries: RevokedEntry[] }[] = [];

    for (const kv of records.value.kvs) {
      if (kv.key.startsWith(REVOKED_PREFIX)) {
        const entry = parseRevoked(kv.value);
        if (!entry) continue;
        if (entry.notAfter < now) drop(kv);
        else revoked.set(entry.serial, entry);
      } else if (kv.key.startsWith(MEMBER_RECORD_PREFIX)) {
        const record = parseMemberRecord(kv.value);
        if (!record || members.some((m) => m.id === record.memberID)) continue;
        const why = `its member ${record.memberID} is no longer in etcd's member list`;
        drop(kv);
        ops.push(...revocations(record.certificates, record, why, now));
        this.#log(`revoking node ${record.node}'s certificates (${record.certificates.map((c) => c.serial).join(", ")}): ${why}`);
      } else if (kv.key.startsWith(LEARNER_RECORD_PREFIX)) {
        const record = parse(kv.value);
        if (!record) continue;
        const byUrl = memberByPeerUrl(members, record.peerURL);
        const member = byUrl && recordIsFor(record, byUrl.id) ? byUrl : undefined;
        // Promoted (its record becomes the member's in the next add's write, learner-records.ts):
        // it stands for the member's record until then, so nothing is written here.
        if (member && !member.isLearner) continue;
        const entries = record.certificates ?? [];
        if (!member && record.memberID !== undefined) {
          // Written after its member's add, for that member, which etcd no longer lists: gone
          // (removed, promoted or not), whatever its admission says.
          const why = `its member ${record.memberID} is no longer in etcd's member list`;
          drop(kv);
          ops.push(...revocations(entries, record, why, now));
          if (entries.length) this.#log(`revoking node ${record.node}'s certificates (${entries.map((c) => c.serial).join(", ")}): ${why}`);
          continue;
        }
        const status = await this.#o.admissionStatus(record.token, record.jti);
        if (status === null || status.active) continue;
        if (member && status.reason === "revoked") {
          const why = `its admission ${record.jti} for node ${record.node} was revoked`;
          reaps.push({ peerURL: record.peerURL, node: record.node, why, entries: entries.map((e) => entry(e, record, why, now)) });
        } else if (!member) {
          const why = `no member has its peer URL and its admission ${record.jti} ended (${status.reason})`;
          drop(kv);
          ops.push(...revocations(entries, record, why, now));
          if (entries.length) this.#log(`revoking node ${record.node}'s certificates (${entries.map((c) => c.serial).join(", ")}): ${why}`);
        }
      }
    }

    let revision = BigInt(records.value.revision || "0");
    if (ops.length) {
      const written = await gateway.txn(ops, { unchanged });
      if (!written.ok) throw new Error(`writing the revocations: ${written.error.message}`);
      if (!written.value.applied) {
        this.#log("revocation sweep: a record changed while it was read (an add wrote it); the next sweep reads them again");
        return;
      }
      revision = BigInt(written.value.revision || "0");
      for (const op of ops) if ("put" in op && op.put.key.startsWith(REVOKED_PREFIX)) addEntry(revoked, parseRevoked(op.put.value));
    }
    for (const reap of reaps) {
      const removed = await this.#o.membership.removeLearner(reap.peerURL, reap.why);
      if (!removed.ok) {
        this.#log(`could not remove node ${reap.node}'s learner yet (${removed.detail}); its certificates are revoked once it is`);
        continue;
      }
      // Its record and certificates were revoked in the removal's own write (learner-records.ts).
      for (const e of reap.entries) revoked.set(e.serial, e);
    }

    const serials = [...revoked.keys()].sort();
    const current = this.#list;
    const same = current !== null && current.serials.length === serials.length && [...current.serials].sort().every((s, i) => s === serials[i]);
    if (same && now - current.thisUpdate < RESIGN_MS) return;
    // etcd's revision: every instance numbers the state it read the same way, a later state higher.
    const number = current && current.number > revision ? current.number : revision;
    this.#list = await createRevocationList(
      this.#o.ca,
      serials.map((s) => ({ serial: s, revokedAt: revoked.get(s)!.revokedAt })),
      number,
      now,
    );
  }
}

function entry(e: { serial: string; notAfter: number }, who: { node: string; peerURL: string }, reason: string, now: number): RevokedEntry {
  return { serial: e.serial.toLowerCase(), node: who.node, peerURL: who.peerURL, notAfter: e.notAfter, reason, revokedAt: now };
}

function addEntry(into: Map<string, RevokedEntry>, e: RevokedEntry | null): void {
  if (e) into.set(e.serial, e);
}
