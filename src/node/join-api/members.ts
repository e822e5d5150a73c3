/**
 * The etcd side of the join API: add a node as a learner (once, even when asked twice), promote
 * it when it has started and caught up, and make room by removing a learner whose admission has
 * ended (or that nobody here knows and that stalled for the grace period), started or not.
 * Voters are never removed. Every membership change of this process runs one at a time; several
 * learners may be pending at once when etcd allows it (3.6+ with `--max-learners`), each promoted
 * as soon as it is started and in sync.
 *
 * When etcd says "in a moment" (the cluster settles for 5 s after each change, a learner starts
 * and catches up), the request is held and retried here every 50 ms, for up to `holdMs`, rather
 * than answered at once: HTTP's Retry-After counts whole seconds, so a node sent away would come
 * back up to a second or two after etcd was ready, for every step of every join.
 * @module
 */
import { canonicalPeerUrl } from "../../shared/protocol/identifiers.ts";
import { memberIdHex } from "../../shared/protocol/member-id.ts";
import {
  initialClusterEntries,
  memberByPeerUrl,
  type EtcdError,
  type EtcdGateway,
  type EtcdMember,
  type EtcdResult,
  type MemberAddResult,
} from "../etcd/gateway.ts";
import { LearnerRecords, type CertificateEntry, type RecordsRead } from "./learner-records.ts";
import { RETRY_AFTER, fromEtcdError, refuse, type JoinApiProblemCode, type Outcome } from "./outcome.ts";

export interface AddedMember {
  memberID: string;
  learner: boolean;
  initialCluster: string[];
  /** The member has run already: a node with an empty data dir must not start etcd as it. */
  started: boolean;
}

export interface PromotedMember {
  memberID: string;
  learner: false;
}

/** Which admission added which member, so a learner whose admission ended can be reaped. */
export interface AdmissionRecord {
  node: string;
  peerURL: string;
  jti: string;
  token: string;
  memberID: string;
  addedAt: number;
}

/**
 * The broker's introspection answer, reduced to what the join API needs: whether the admission
 * is active and, when the broker says, how long its lease has left (in ms, as the broker counts).
 */
export type AdmissionStatus = { active: true; leaseRemainingMs?: number } | { active: false; reason: string };

export interface MembershipOptions {
  gateway: EtcdGateway;
  /** Is this admission (token, and its jti) still active, and if not, why? null when that cannot be told now. */
  admissionStatus(token: string, jti: string): Promise<AdmissionStatus | null>;
  /**
   * How long a learner nobody can vouch for (no record of its admission, here or in etcd; or
   * still a learner after its node reported completion) may block the next join before it is
   * removed. Default 5 min.
   */
  unknownLearnerGraceMs?: number;
  /** How long an add or promote is held while etcd says "in a moment" (0: answer at once). Default 10 s. */
  holdMs?: number;
  log?: (line: string) => void;
  now?: () => number;
}

export interface AddInput {
  node: string;
  peerURL: string;
  jti: string;
  token: string;
  /** The certificates signed for this learner beside its add (their serials), recorded in the write right after it, before any is handed out. */
  certificates?: CertificateEntry[];
}

/** What an add does about a learner already there (see `#assess`). */
type Room = { kind: "goes"; why: string } | { kind: "stays"; outcome: Outcome<AddedMember> };
const stays = (outcome: Outcome<AddedMember>): Room => ({ kind: "stays", outcome });

/**
 * The broker's answer on this admission as the request's verification got it, and when: an add
 * or promote that goes straight through (nothing ahead of it, no learner removed, its first
 * attempt) is made on it rather than asking the broker again a few milliseconds later.
 */
export interface FirstLook {
  status: Extract<AdmissionStatus, { active: true }>;
  /** When the answer arrived (Date.now()). */
  at: number;
}

/** etcd refusals that etcd lifts by itself within seconds: worth holding the request for. */
const SETTLING: ReadonlySet<JoinApiProblemCode> = new Set(["etcd_unhealthy", "not_enough_started_members", "learner_not_started", "learner_not_in_sync"]);
/** Held attempts start this often (from one attempt's start to the next one's). */
const HOLD_RETRY_MS = 50;
/** A held request asks about another learner's admission it heard called active at most this often. */
const SEEN_ACTIVE_MS = 1_000;
/** A first look older than this is not used (the request took long to come this far). */
const FIRST_LOOK_MS = 1_000;
/** How long a promotion waits for adds in flight: etcd's health window, the most it can save. */
const ADDS_FIRST_MS = 5_000;
/**
 * An add or promote is answered this long before the admission's lease ends, or given up: the
 * broker's `Date` counts whole seconds, and its answer took a moment to arrive. Half the time
 * left when that is less than twice this: a short lease (seconds, in tests) is renewed every
 * third of it, and must still leave room for a change.
 */
const LEASE_MARGIN_MS = 2_000;
/** Less time than this before that bound, and etcd is not asked at all. */
const LEAST_CHANGE_MS = 250;
/** Longer than a second of any clock: etcd's next second, whatever its clock says now. */
const NEXT_ID_MS = 1_100;

export class Membership {
  readonly #gateway: EtcdGateway;
  readonly #admissionStatus: MembershipOptions["admissionStatus"];
  readonly #graceMs: number;
  readonly #holdMs: number;
  readonly #log: (line: string) => void;
  readonly #now: () => number;
  /** By canonical peer URL: what this process added (the shared copy in etcd is `#shared`). */
  readonly #records = new Map<string, AdmissionRecord>();
  readonly #shared: LearnerRecords;
  /** When a learner with no usable record was first seen blocking a join, by member ID. */
  readonly #unknownSince = new Map<string, number>();
  #queue: Promise<unknown> = Promise.resolve();
  /** Held requests waiting for their next attempt: a change that may have unblocked them wakes them early. */
  readonly #wakers = new Set<() => void>();
  /** Serialized tasks queued or running. */
  #inQueue = 0;
  /** Add requests being served (held or in turn), for `promote`. */
  #addsInFlight = 0;

  constructor(options: MembershipOptions) {
    this.#gateway = options.gateway;
    this.#shared = new LearnerRecords(options.gateway);
    this.#admissionStatus = options.admissionStatus;
    this.#graceMs = options.unknownLearnerGraceMs ?? 300_000;
    this.#holdMs = options.holdMs ?? 10_000;
    this.#log = options.log ?? (() => {});
    this.#now = options.now ?? Date.now;
  }

  records(): AdmissionRecord[] {
    return [...this.#records.values()];
  }

  /**
   * Adds `peerURL` as a learner for `node`, or returns the member that already has it. The
   * certificates about to be signed for it are recorded with its admission, in the write made
   * right after the add, before the answer.
   *
   * `onAdding` is called once an attempt finds nothing to wait for and goes on to the add (the
   * caller's own work for the added node, its certificates say, can start then).
   */
  async addLearner(input: AddInput, firstLook?: FirstLook, onAdding?: () => void): Promise<Outcome<AddedMember>> {
    this.#addsInFlight++;
    try {
      const seen = new Map<string, number>();
      return await this.#held((first) => this.#serialized((straight) => this.#addLearner(input, first && straight ? firstLook : undefined, onAdding, seen)));
    } finally {
      this.#addsInFlight--;
    }
  }

  /**
   * Promotes the learner with this peer URL once it has started and is in sync. The broker is
   * asked again before every attempt (the hold may outlive the admission).
   *
   * While other nodes' adds are waiting here, the promotion waits for them (up to 5 s): a new
   * voter makes etcd refuse the next add until the leader has been connected to it for 5 s,
   * whereas learners added first and then promoted back to back pay that window once, not once
   * per promotion. Waiting is quorum-safe: a learner never votes.
   */
  async promote(input: { node: string; peerURL: string; jti: string; token: string }, firstLook?: FirstLook): Promise<Outcome<PromotedMember>> {
    this.#wake();
    const until = Date.now() + ADDS_FIRST_MS;
    let waited = false;
    while (this.#addsInFlight > 0 && Date.now() < until) {
      waited = true;
      await new Promise((r) => setTimeout(r, HOLD_RETRY_MS));
    }
    return this.#held((first) => {
      // The broker is asked as the attempt queues for its turn, not once it has it: promotions
      // back to back would each hold the others up for a round trip to the broker. The answer
      // counts if it is under a second old when the promote is made (as a request's own look does).
      const look = first && !waited && firstLook ? Promise.resolve(firstLook) : this.#freshLook(input);
      return this.#serialized((straight) => this.#promote(input, look, first && straight && !waited ? firstLook : undefined));
    });
  }

  /** The broker's answer on this admission now, and when it came. */
  async #freshLook(input: { token: string; jti: string }): Promise<{ status: AdmissionStatus | null; at: number }> {
    const status = await this.#admissionStatus(input.token, input.jti).catch(() => null);
    return { status, at: Date.now() };
  }

  /**
   * Removes the learner with this peer URL now, if it still is one: its admission was revoked
   * (the revocation sweep, ledger.ts). Quorum-safe like every learner removal; taken in turn with
   * every other membership change. A voter is never removed.
   */
  async removeLearner(peerURL: string, why: string): Promise<Outcome<boolean>> {
    return this.#serialized(async (): Promise<Outcome<boolean>> => {
      const list = await this.#gateway.memberList();
      if (!list.ok) return fromEtcdError(list.error);
      const learner = memberByPeerUrl(list.value.members, peerURL);
      if (!learner?.isLearner) return { ok: true, value: false };
      const failed = await this.#remove(learner, why);
      if (failed && !failed.ok) return failed;
      return { ok: true, value: true };
    });
  }

  /** The member with this peer URL, for read-only questions (no lock needed). */
  async member(peerURL: string): Promise<Outcome<EtcdMember | null>> {
    const list = await this.#gateway.memberList();
    if (!list.ok) return fromEtcdError(list.error);
    return { ok: true, value: memberByPeerUrl(list.value.members, peerURL) ?? null };
  }

  /**
   * Retries an attempt while etcd's refusal is one that passes by itself, for up to the hold time.
   * Each attempt is a whole add or promote (member list, admission check, change), taken in turn
   * with every other membership change; the waits between attempts hold no lock. Attempts start
   * every 50 ms (the next one's start counted from the last one's), so that an add waiting for
   * etcd's health window is made within about that of the window's end.
   */
  async #held<T>(attempt: (first: boolean) => Promise<Outcome<T>>): Promise<Outcome<T>> {
    // Real time, not the injectable clock of the grace period: this wait really happens.
    const until = Date.now() + this.#holdMs;
    for (let first = true; ; first = false) {
      const began = Date.now();
      const outcome = await attempt(first);
      if (outcome.ok || !SETTLING.has(outcome.code) || Date.now() + HOLD_RETRY_MS > until) return outcome;
      await new Promise<void>((r) => {
        const wake = () => {
          clearTimeout(timer);
          this.#wakers.delete(wake);
          r();
        };
        const timer = setTimeout(wake, Math.max(0, began + HOLD_RETRY_MS - Date.now()));
        this.#wakers.add(wake);
      });
    }
  }

  /**
   * Wakes the held requests for their next attempt now: a node asking for its promotion has
   * just seen its etcd serve (its learner has started, which held adds wait for), and a
   * promotion makes room for another learner.
   */
  #wake(): void {
    for (const wake of [...this.#wakers]) wake();
  }

  /** Runs `task` after every change queued before it; `straight` tells it whether nothing was ahead of it. */
  #serialized<T>(task: (straight: boolean) => Promise<T>): Promise<T> {
    const straight = this.#inQueue === 0;
    this.#inQueue++;
    const run = this.#queue.then(
      () => task(straight),
      () => task(straight),
    );
    this.#queue = run.catch(() => undefined).finally(() => this.#inQueue--);
    return run;
  }

  async #addLearner(input: AddInput, firstLook?: FirstLook, onAdding?: () => void, seen: Map<string, number> = new Map()): Promise<Outcome<AddedMember>> {
    const peerURL = canonicalPeerUrl(input.peerURL);
    const list = await this.#gateway.memberList();
    if (!list.ok) return fromEtcdError(list.error);
    const members = list.value.members;

    const existing = memberByPeerUrl(members, peerURL);
    if (existing) return await this.#alreadyMember(existing, members, input, peerURL);

    const learners = members.filter((m) => m.isLearner);
    // Forget grace clocks of learners that are gone or promoted meanwhile.
    for (const id of this.#unknownSince.keys()) if (!learners.some((m) => m.id === id)) this.#unknownSince.delete(id);
    // Several learners may be pending at once (etcd ≥ 3.6 started with --max-learners M holds up
    // to M; etcd alone knows M), so a learner that stays is no reason to wait by itself. Two are:
    // - one that has not started yet: a joining etcd checks the member list it was given
    //   (`initialCluster`) against the cluster's and exits if they differ, so no member is added
    //   or removed until it has started (pipelined adds follow each other one start apart);
    // - etcd having no room for another learner: then the first learner that stays is the answer.
    // etcd's records are read (once) only when a learner's fate depends on them.
    let read: Promise<EtcdResult<RecordsRead>> | null = null;
    const records = () => (read ??= this.#shared.read());
    // A learner that has not started and stays is the answer by itself: asked about first, alone.
    const unstarted = learners.filter((m) => !m.started);
    const rooms: { learner: EtcdMember; room: Room }[] = [];
    for (const learner of unstarted) {
      const room = await this.#assess(learner, records, seen);
      if (room.kind === "stays") return room.outcome;
      rooms.push({ learner, room });
    }
    // The started ones all at once (the broker asked about each in parallel), and, unless this add
    // went straight through on its request's look, about this admission too (used below only if
    // no learner had to go to make room).
    onAdding?.();
    const started = learners.filter((m) => m.started);
    const ownLook = recent(firstLook) ?? this.#admissionStatus(input.token, input.jti);
    if (ownLook instanceof Promise) ownLook.catch(() => undefined);
    rooms.push(...(await Promise.all(started.map(async (learner) => ({ learner, room: await this.#assess(learner, records, seen) })))));
    let pending: Outcome<AddedMember> | null = null;
    let madeRoom = false;
    for (const { learner, room } of rooms) {
      if (room.kind === "stays") pending ??= room.outcome;
      else {
        const failed = await this.#remove(learner, room.why);
        if (failed) return failed;
        madeRoom = true;
      }
    }

    // The admission may have ended while this add waited its turn, listed members or made room:
    // ask once more right before the add, so no member is added after its end is visible here.
    // An add that went straight through (nothing ahead of it, no room made) is made on the look
    // its request's verification took moments ago. A broker that cannot answer is no yes.
    const status = madeRoom ? await this.#admissionStatus(input.token, input.jti) : await ownLook;
    const cleared = clearedToChange(input, status, "added");
    if (!cleared.ok) return cleared;
    const { deadline, leaseRemainingMs } = cleared.value;

    // etcd's records, read while the add is made: the write after it turns the records of learners
    // promoted since into their members' and revokes what a record left for this peer URL named.
    const before = this.#shared.read({ deadline });
    before.catch(() => undefined);
    const added = await this.#memberAdd(peerURL, deadline);
    if (!added.ok) {
      // Perhaps made anyway: the member is then found by the node's next ask (which records it),
      // or, unrecorded, removed by a later add once it has blocked joins for the grace period.
      if (outOfTime(added.error, deadline)) return leaseEnding(input, "added", leaseRemainingMs);
      if (added.error.kind === "peer_url_exists" || added.error.kind === "member_id_exists") {
        // Another add for this peer won the race (or an earlier try timed out after etcd applied it).
        const again = await this.#gateway.memberList();
        if (!again.ok) return fromEtcdError(again.error);
        const member = memberByPeerUrl(again.value.members, peerURL);
        if (member) return await this.#alreadyMember(member, again.value.members, input, peerURL);
        return refuse(503, "etcd_unavailable", `etcd reports ${added.error.message} but lists no member with peer URL ${peerURL} yet`, RETRY_AFTER.unavailable);
      }
      if (added.error.kind === "too_many_learners" && pending) return pending;
      if (added.error.kind === "member_not_found") {
        return refuse(
          503,
          "etcd_error",
          `etcd: ${added.error.message} (an add names no member: etcd refused the ID it made for ${peerURL}, that of a member removed moments ago)`,
          RETRY_AFTER.idRemoved,
        );
      }
      return fromEtcdError(added.error);
    }
    const member = added.value.member;
    this.#remember(input, peerURL, member.id);
    this.#log(`added learner ${memberIdHex(member.id)} for node ${input.node} (${peerURL}, admission ${input.jti})`);
    // Recorded for every instance right after the add, before the node hears of it: one raft
    // entry that names the certificates signed for it meanwhile and makes the records of
    // learners promoted since their members' (never the record of a peer URL that has a learner
    // now: another instance may have added it meanwhile).
    const record = { node: input.node, peerURL, jti: input.jti, token: input.token, memberID: member.id, certificates: input.certificates };
    const readBefore = await before;
    const recorded = readBefore.ok
      ? await this.#shared.write(record, readBefore.value, added.value.members, { deadline })
      : await this.#shared.keep(record, { deadline });
    if (!recorded.ok) {
      // No certificate leaves here without its record: the node asks again (its learner is found
      // and recorded then, with the certificates signed for that ask).
      if (input.certificates?.length) {
        this.#log(
          `could not record learner ${memberIdHex(member.id)}'s admission and certificates in etcd (${recorded.error.message}); its node is asked to come back`,
        );
        return outOfTime(recorded.error, deadline) ? leaseEnding(input, "added", leaseRemainingMs) : fromEtcdError(recorded.error);
      }
      // The member is there either way: this instance vouches for it from memory, another one that
      // finds no record gives it the grace period, and the node's next ask records it again.
      this.#log(`could not record learner ${memberIdHex(member.id)}'s admission in etcd (${recorded.error.message}); only this join API instance knows it`);
    }
    return {
      ok: true,
      value: { memberID: member.id, learner: true, initialCluster: this.#initialCluster(added.value.members, input.node, peerURL), started: false },
    };
  }

  /**
   * etcd makes a new member's ID from its peer URLs and the current second (of etcd's clock), and
   * refuses an ID it removed, as "member not found": so a peer URL whose learner was removed
   * within this second cannot be added again until the next. Asked once more a second later
   * (when the deadline leaves room), it gets another ID.
   */
  async #memberAdd(peerURL: string, deadline: number | undefined): Promise<EtcdResult<MemberAddResult>> {
    const added = await this.#gateway.memberAdd([peerURL], { learner: true, deadline });
    if (added.ok || added.error.kind !== "member_not_found") return added;
    if (deadline !== undefined && deadline - Date.now() < NEXT_ID_MS + LEAST_CHANGE_MS) return added;
    this.#log(
      `etcd refused the ID it made for ${peerURL} (${added.error.message}): a member with that peer URL was removed within this second; adding it again in ${NEXT_ID_MS} ms`,
    );
    await new Promise((r) => setTimeout(r, NEXT_ID_MS));
    return this.#gateway.memberAdd([peerURL], { learner: true, deadline });
  }

  async #alreadyMember(member: EtcdMember, members: EtcdMember[], input: AddInput, peerURL: string): Promise<Outcome<AddedMember>> {
    if (member.started && member.name !== "" && member.name !== input.node) {
      return refuse(409, "peer_url_conflict", `peer URL ${peerURL} belongs to running member ${member.name} (${member.id}), not to node ${input.node}`);
    }
    if (member.isLearner || !member.started) {
      this.#remember(input, peerURL, member.id);
      // The newer admission decides, in every instance.
      // A node asking again before its member started gets new certificates (its keys were only
      // in the memory of the run that crashed); the ones signed before stay this member's.
      const saved = await this.#shared.keep({
        node: input.node,
        peerURL,
        jti: input.jti,
        token: input.token,
        memberID: member.id,
        certificates: member.started ? [] : input.certificates,
      });
      if (!saved.ok) return fromEtcdError(saved.error);
    }
    this.#log(`node ${input.node} asked again for ${peerURL}: already member ${memberIdHex(member.id)}${member.isLearner ? " (learner)" : ""}`);
    return {
      ok: true,
      value: { memberID: member.id, learner: member.isLearner, initialCluster: this.#initialCluster(members, input.node, peerURL), started: member.started },
    };
  }

  /**
   * Whether this learner goes (and why), or stays (with the answer to give should it be in the way).
   *
   * etcd allows few learners (≤ 3.5: one; 3.6+: `--max-learners`), so a learner left behind
   * blocks later adds. It goes when:
   * - its recorded admission is no longer active (lease expired, revoked, abandoned, superseded),
   *   started or not: its node is no longer allowed to join with it, and a node admitted again
   *   is added anew. Not when the admission is `completed`: its node reported itself a voter, so
   *   it is being promoted (through another join API instance, say).
   * - nobody vouches for it (no record of its admission, neither in etcd, where every instance
   *   keeps one for each learner it adds, nor here; or still a learner after its node completed)
   *   and it kept blocking joins for the grace period, like k3s evicting a learner stalled for 5
   *   minutes. Another instance's learner is never unknown: its admission is asked like our own.
   * Removing a learner is always quorum-safe: learners never count toward quorum, so the voters
   * and their majority are the same before and after. Voters never come here.
   */
  /**
   * `seen`: the other learners' admissions this request (held, asking again every 50 ms) heard
   * the broker call active, and when; each is asked again once a second, not at every attempt, so
   * a held request learns of another admission's end within a second. A new request asks afresh.
   */
  async #assess(learner: EtcdMember, records: () => Promise<EtcdResult<RecordsRead>>, seen: Map<string, number>): Promise<Room> {
    const who = learner.name || learner.peerURLs.join(",");
    const state = learner.started ? "is running and waits for promotion" : "has not started";
    // A learner this instance added, whose admission the broker calls active, stays: no other
    // record can say otherwise, an active admission being its node's only one. Any other verdict
    // is made on etcd's record, the newest admission's in every instance.
    const own = learner.peerURLs.map((u) => this.#records.get(canonicalPeerUrl(u))).find((r) => r?.memberID === learner.id);
    const ask = async (token: string, jti: string): Promise<AdmissionStatus | null> => {
      const at = seen.get(token);
      if (at !== undefined && Date.now() - at < SEEN_ACTIVE_MS) return { active: true };
      const status = await this.#admissionStatus(token, jti);
      if (status?.active) seen.set(token, Date.now());
      else seen.delete(token);
      return status;
    };
    const ownStatus = own ? await ask(own.token, own.jti) : null;
    let record: { node: string; jti: string; token: string } | null = own ?? null;
    let known: AdmissionStatus | null = ownStatus?.active ? ownStatus : null;
    if (!known) {
      const shared = await records();
      if (!shared.ok) return stays(fromEtcdError(shared.error));
      const found = shared.value.of(learner);
      if (found && (found.jti !== own?.jti || found.token !== own?.token)) record = found;
      else if (ownStatus) known = ownStatus;
    }
    let why: string | null = null;
    if (record) {
      const status = known ?? (await ask(record.token, record.jti));
      if (status === null) {
        return stays(
          refuse(
            503,
            "broker_unavailable",
            `learner ${who} (${learner.id}) ${state} and the broker cannot say whether node ${record.node}'s admission is still active`,
            RETRY_AFTER.unavailable,
          ),
        );
      }
      if (status.active && !learner.started) {
        return stays(
          refuse(
            503,
            "learner_not_started",
            `learner ${learner.id} for node ${record.node} was added and has not started yet; the next member is added once it has`,
            RETRY_AFTER.learnerNotStarted,
          ),
        );
      }
      if (status.active) {
        return stays(
          refuse(
            503,
            "learner_pending",
            `learner ${learner.id} for node ${record.node} ${state} and its admission is active; etcd has no room for another learner (3.4/3.5: one; 3.6+: --max-learners)`,
            RETRY_AFTER.learnerPending,
          ),
        );
      }
      if (status.reason !== "completed") why = `its admission ${record.jti} for node ${record.node} is no longer active (${status.reason})`;
    }
    if (why === null) {
      const since = this.#unknownSince.get(learner.id) ?? this.#now();
      this.#unknownSince.set(learner.id, since);
      const waited = this.#now() - since;
      const unvouched = record ? `node ${record.node} reported completion but it is still a learner` : "no join API recorded its admission";
      if (waited < this.#graceMs) {
        return stays(
          refuse(
            503,
            "learner_pending",
            `learner ${who} (${learner.id}) ${state}; ${unvouched}, so it is removed if still a learner ${Math.ceil((this.#graceMs - waited) / 1000)} s from now`,
            RETRY_AFTER.learnerPending,
          ),
        );
      }
      why = `${unvouched}, and it blocked joins for ${Math.round(waited / 1000)} s`;
    }
    return { kind: "goes", why };
  }

  /** Removes a learner (null), or the answer to give when etcd would not. */
  async #remove(learner: EtcdMember, why: string): Promise<Outcome<AddedMember> | null> {
    const removed = await this.#gateway.memberRemove(learner.id);
    if (!removed.ok && removed.error.kind !== "member_not_found") return fromEtcdError(removed.error);
    for (const url of learner.peerURLs) this.#records.delete(canonicalPeerUrl(url));
    await this.#shared.forget(learner.peerURLs, `its learner was removed: ${why}`);
    this.#unknownSince.delete(learner.id);
    this.#log(`removed ${learner.started ? "started" : "unstarted"} learner ${memberIdHex(learner.id)} (${learner.peerURLs.join(",")}): ${why}`);
    return null;
  }

  async #promote(
    input: { node: string; peerURL: string; jti: string; token: string },
    look: Promise<{ status: AdmissionStatus | null; at: number }>,
    firstLook?: FirstLook,
  ): Promise<Outcome<PromotedMember>> {
    const peerURL = canonicalPeerUrl(input.peerURL);
    const list = await this.#gateway.memberList();
    if (!list.ok) return fromEtcdError(list.error);
    const member = memberByPeerUrl(list.value.members, peerURL);
    if (!member) return refuse(404, "member_not_found", `no etcd member has peer URL ${peerURL}; add it first (POST /v1beta1/etcd/members)`);
    if (!member.isLearner) return { ok: true, value: { memberID: member.id, learner: false } };
    // As before an add: the admission may have ended while this promote was held or waited its
    // turn, so each promote attempt is made on a look at the broker under a second old: its
    // request's own when it went straight through, else the one taken as it queued, else a new one.
    const queued = await look;
    const fromQueue = queued.status?.active
      ? recent({ status: queued.status, at: queued.at })
      : queued.status && Date.now() - queued.at <= FIRST_LOOK_MS
        ? queued.status
        : null;
    const status = recent(firstLook) || fromQueue || (await this.#admissionStatus(input.token, input.jti));
    const cleared = clearedToChange(input, status, "promoted");
    if (!cleared.ok) return cleared;
    const { deadline, leaseRemainingMs } = cleared.value;
    // etcd 3.4.23 may promote a learner that never started (fixed in 3.4.24), so check it here.
    if (!member.started) {
      return refuse(
        503,
        "learner_not_started",
        `learner ${member.id} for node ${input.node} has not started yet (start etcd with the initialCluster it was given)`,
        RETRY_AFTER.learnerNotStarted,
      );
    }
    const promoted = await this.#gateway.memberPromote(member.id, { deadline });
    if (!promoted.ok) {
      if (outOfTime(promoted.error, deadline)) return leaseEnding(input, "promoted", leaseRemainingMs);
      if (promoted.error.kind === "member_not_learner") return { ok: true, value: { memberID: member.id, learner: false } };
      return fromEtcdError(promoted.error);
    }
    // No write here (the node is not kept waiting): its learner record, which names this member
    // and its certificates, stands for the member's record until the next add's write turns it
    // into one (learner-records.ts); the revocation sweep reads it as the member's meanwhile.
    this.#records.delete(peerURL);
    this.#log(`promoted learner ${memberIdHex(member.id)} (node ${input.node}, ${peerURL}) to voter`);
    this.#wake();
    return { ok: true, value: { memberID: member.id, learner: false } };
  }

  #remember(input: { node: string; jti: string; token: string }, peerURL: string, memberID: string): void {
    const previous = this.#records.get(peerURL);
    // Keep the original record when the same node asks again with a newer admission: the newer one decides.
    this.#records.set(peerURL, { node: input.node, peerURL, jti: input.jti, token: input.token, memberID, addedAt: previous?.addedAt ?? this.#now() });
  }

  /** `--initial-cluster` for the node: started members by their names, the new member by the node's. */
  #initialCluster(members: EtcdMember[], node: string, peerURL: string): string[] {
    return initialClusterEntries(members, (m) => {
      if (m.peerURLs.some((u) => canonicalPeerUrl(u) === peerURL)) return node;
      const record = m.peerURLs.map((u) => this.#records.get(canonicalPeerUrl(u))).find(Boolean);
      // etcd matches the other entries by peer URL only, so any distinct name will do.
      return record?.node ?? `member-${m.id}`;
    });
  }
}

/** The first look, its lease counted down to now, if it is recent enough to act on. */
function recent(look: FirstLook | undefined): AdmissionStatus | null {
  if (!look) return null;
  const age = Date.now() - look.at;
  if (age < 0 || age > FIRST_LOOK_MS) return null;
  return look.status.leaseRemainingMs === undefined ? { active: true } : { active: true, leaseRemainingMs: look.status.leaseRemainingMs - age };
}

/** What ended too early for each change, when its admission ended before it. */
const ENDED_BEFORE = { added: "its member could be added", promoted: "its learner could be promoted" } as const;

/**
 * The broker's word on an admission, right before etcd is asked to change for it: how long its
 * lease has left and when the change must be answered (both undefined without a lease), or why
 * nothing is changed: the broker could not say, the admission ended, or its lease ends too soon.
 * Past the lease's end the broker may have admitted the next node: a change answered then would be
 * made for an admission that ended (an unreachable endpoint alone costs a 10 s timeout).
 */
function clearedToChange(
  input: { node: string; jti: string },
  status: AdmissionStatus | null,
  what: "added" | "promoted",
): Outcome<{ deadline: number | undefined; leaseRemainingMs: number | undefined }> {
  if (status === null) return brokerSilent(input, what);
  if (!status.active) {
    return refuse(
      410,
      status.reason === "revoked" ? "admission_revoked" : "admission_inactive",
      `admission ${input.jti} of node ${input.node} ended before ${ENDED_BEFORE[what]} (${status.reason})`,
    );
  }
  const deadline = changeDeadline(status);
  if (deadline !== undefined && deadline - Date.now() < LEAST_CHANGE_MS) return leaseEnding(input, what, status.leaseRemainingMs);
  return { ok: true, value: { deadline, leaseRemainingMs: status.leaseRemainingMs } };
}

/** When an etcd change for this admission must be answered by (this machine's clock), if the broker told its lease. */
function changeDeadline(status: { leaseRemainingMs?: number }): number | undefined {
  if (status.leaseRemainingMs === undefined) return undefined;
  return Date.now() + status.leaseRemainingMs - Math.min(LEASE_MARGIN_MS, status.leaseRemainingMs / 2);
}

/** etcd did not answer and the deadline has passed (rather than every endpoint being down early). */
function outOfTime(error: EtcdError, deadline: number | undefined): boolean {
  return error.kind === "unavailable" && deadline !== undefined && Date.now() >= deadline;
}

function leaseEnding<T>(input: { node: string; jti: string }, what: "added" | "promoted", remainingMs: number | undefined): Outcome<T> {
  const left = remainingMs === undefined ? "" : ` (${Math.max(0, Math.round(remainingMs / 1000))} s were left)`;
  return refuse(
    503,
    "admission_lease_ending",
    `the lease of admission ${input.jti} of node ${input.node} ends before etcd could answer${left}, so nothing is ${what} now; ask again once the node's heartbeat has extended it`,
    RETRY_AFTER.leaseEnding,
  );
}

/** Fail closed: without the broker's word that the admission is still active, etcd is not changed. */
function brokerSilent<T>(input: { node: string; jti: string }, what: "added" | "promoted"): Outcome<T> {
  return refuse(
    503,
    "broker_unavailable",
    `the broker cannot say now whether admission ${input.jti} of node ${input.node} is still active, so nothing is ${what}`,
    RETRY_AFTER.unavailable,
  );
}
