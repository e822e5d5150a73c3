/**
 * What differs between the etcd minor versions the agent and the join API support (3.4 to 3.7),
 * in one table, and which version a binary is.
 *
 * Everything here was read off the real binaries (test/e2e/etcd-versions.test.ts provokes each
 * refusal on each version and checks the entry): etcd's refusal texts and gRPC codes are the same
 * on every version (even "not enough started members" coming back as gRPC Unknown, HTTP 500, on
 * all of them), but the JSON gateway turns FailedPrecondition into HTTP 412 on 3.4 and 400
 * from 3.5 on, and drops the `error` field of its error body from 3.6 on; the learner limit is a
 * fixed 1 before 3.6 and `--max-learners` (default 1) from 3.6.0 on (`--experimental-max-learners`
 * only ever existed in 3.6 pre-releases: every release refuses it); 3.6 removed `--enable-v2`,
 * 3.7 the experimental flags 3.6 deprecated.
 * @module
 */
import { execFile } from "node:child_process";

export type EtcdMinor = "3.4" | "3.5" | "3.6" | "3.7";

/** Oldest first. */
export const ETCD_MINORS: readonly EtcdMinor[] = ["3.4", "3.5", "3.6", "3.7"];

/** etcd's refusals of a membership change that the join API tells apart. */
export type EtcdRefusal =
  /** More learners than the limit (1 before 3.6, `--max-learners` from 3.6). */
  | "too_many_learners"
  /** The leader has not been connected to every voter for 5 s (strict reconfiguration check). */
  | "unhealthy_cluster"
  /** Adding or promoting a voter would leave fewer started members than a quorum. */
  | "not_enough_started"
  /** Promote of a learner that is behind the leader (less than 90 % of its log), or never started. */
  | "learner_not_ready"
  /** Promote of a member that is already a voter. */
  | "member_not_learner"
  /** Add with a peer URL another member has (asked in a later second than that member's add). */
  | "peer_url_exists"
  /** Add with a peer URL asked for in the same second as an earlier add (etcd's member ID hashes the time in seconds). */
  | "member_id_exists"
  | "member_not_found";

/** etcd's "try again" answers: no leader, timeouts, overload. */
export type EtcdUnavailable =
  | "no_leader"
  | "leader_changed"
  | "timed_out"
  | "timed_out_leader_fail"
  | "timed_out_connection_lost"
  | "not_capable"
  | "stopped"
  | "too_many_requests"
  /** The gateway's own deadline passed first (seen on a busy machine instead of "request timed out"). */
  | "deadline_exceeded"
  /** The endpoint is a learner's, which serves no change and no linearizable read: ask a voter. */
  | "learner_endpoint";

export interface EtcdErrorEntry {
  /** The gateway's `message` (and `error` before 3.6), exactly. */
  message: string;
  /** gRPC status code in the body's `code`. */
  grpcCode: number;
  /** HTTP status of the gateway's answer. */
  httpStatus: number;
}

export interface EtcdTraits {
  minor: EtcdMinor;
  /** The flag that sets how many learners etcd allows at once; null where that limit is fixed. */
  maxLearnersFlag: string | null;
  /** Learners allowed at once without that flag (the fixed limit where there is no flag). */
  defaultMaxLearners: number;
  /** Each refusal of a membership change as this version's gateway answers it. */
  refusals: Readonly<Record<EtcdRefusal, EtcdErrorEntry>>;
  /** etcd's "not now, ask again" answers, as this version's gateway answers them. */
  unavailable: Readonly<Record<EtcdUnavailable, EtcdErrorEntry>>;
  /** Fields of the gateway's error body. */
  errorBodyFields: readonly string[];
  /** Fields a member of `member/list` can have (absent when empty: an unstarted member has no `name`). */
  memberFields: readonly string[];
  /** Response header fields (snake_case on every version). */
  headerFields: readonly string[];
  /** Fields of `maintenance/status` beyond 3.4's. */
  statusExtraFields: readonly string[];
  /** What etcd logs before it exits because its member was removed from the cluster. */
  removedMessages: readonly string[];
  /** Flags this version refuses to start with ("flag provided but not defined"), with what to do instead. */
  refusedFlags: Readonly<Record<string, string>>;
}

// gRPC codes (google.golang.org/grpc/codes).
const UNKNOWN = 2;
const DEADLINE_EXCEEDED = 4;
const FAILED_PRECONDITION = 9;
const UNAVAILABLE = 14;
const NOT_FOUND = 5;
const RESOURCE_EXHAUSTED = 8;

/** The texts (api/v3rpc/rpctypes/error.go), the same on every supported version. */
const REFUSAL_TEXT: Record<EtcdRefusal, [message: string, grpcCode: number]> = {
  too_many_learners: ["etcdserver: too many learner members in cluster", FAILED_PRECONDITION],
  unhealthy_cluster: ["etcdserver: unhealthy cluster", UNAVAILABLE],
  // rpctypes declares it FailedPrecondition, but the add path returns the server's own error, which
  // no version translates: the gateway answers gRPC Unknown, HTTP 500.
  not_enough_started: ["etcdserver: re-configuration failed due to not enough started members", UNKNOWN],
  learner_not_ready: ["etcdserver: can only promote a learner member which is in sync with leader", FAILED_PRECONDITION],
  member_not_learner: ["etcdserver: can only promote a learner member", FAILED_PRECONDITION],
  peer_url_exists: ["etcdserver: Peer URLs already exists", FAILED_PRECONDITION],
  member_id_exists: ["etcdserver: member ID already exist", FAILED_PRECONDITION],
  member_not_found: ["etcdserver: member not found", NOT_FOUND],
};

const UNAVAILABLE_TEXT: Record<EtcdUnavailable, [message: string, grpcCode: number]> = {
  no_leader: ["etcdserver: no leader", UNAVAILABLE],
  leader_changed: ["etcdserver: leader changed", UNAVAILABLE],
  timed_out: ["etcdserver: request timed out", UNAVAILABLE],
  timed_out_leader_fail: ["etcdserver: request timed out, possibly due to previous leader failure", UNAVAILABLE],
  timed_out_connection_lost: ["etcdserver: request timed out, possibly due to connection lost", UNAVAILABLE],
  not_capable: ["etcdserver: not capable", UNAVAILABLE],
  stopped: ["etcdserver: server stopped", UNAVAILABLE],
  too_many_requests: ["etcdserver: too many requests", RESOURCE_EXHAUSTED],
  deadline_exceeded: ["context deadline exceeded", DEADLINE_EXCEEDED],
  learner_endpoint: ["etcdserver: rpc not supported for learner", FAILED_PRECONDITION],
};

/** grpc-gateway's HTTP status per gRPC code: v1 (etcd 3.4) says 412 for FailedPrecondition, v1.16+/v2 say 400. */
function httpStatusFor(grpcCode: number, minor: EtcdMinor): number {
  switch (grpcCode) {
    case FAILED_PRECONDITION:
      return minor === "3.4" ? 412 : 400;
    case NOT_FOUND:
      return 404;
    case DEADLINE_EXCEEDED:
      return 504;
    case RESOURCE_EXHAUSTED:
      return 429;
    case UNAVAILABLE:
      return 503;
    default:
      return 500;
  }
}

function entries<K extends string>(texts: Record<K, [string, number]>, minor: EtcdMinor): Record<K, EtcdErrorEntry> {
  const out = {} as Record<K, EtcdErrorEntry>;
  for (const [key, [message, grpcCode]] of Object.entries(texts) as [K, [string, number]][]) {
    out[key] = { message, grpcCode, httpStatus: httpStatusFor(grpcCode, minor) };
  }
  return out;
}

const REMOVED_MESSAGES = ["the member has been permanently removed from the cluster", "data-dir used by this member must be removed"] as const;
const MEMBER_FIELDS = ["ID", "name", "peerURLs", "clientURLs", "isLearner"] as const;
const HEADER_FIELDS = ["cluster_id", "member_id", "raft_term"] as const;

const NO_MAX_LEARNERS = "this etcd allows one learner at a time and has no flag to change that (etcd 3.6 and later take --max-learners)";
const NO_EXPERIMENTAL_MAX_LEARNERS = "no etcd release takes --experimental-max-learners (only 3.6 pre-releases did); etcd 3.6 and later take --max-learners";

/** What one version shares with its neighbours. */
type SharedTraits = Pick<EtcdTraits, "maxLearnersFlag" | "defaultMaxLearners" | "errorBodyFields" | "statusExtraFields">;

function traits(minor: EtcdMinor, t: SharedTraits & Pick<EtcdTraits, "refusedFlags">): EtcdTraits {
  return Object.freeze({
    minor,
    ...t,
    refusals: Object.freeze(entries(REFUSAL_TEXT, minor)),
    unavailable: Object.freeze(entries(UNAVAILABLE_TEXT, minor)),
    memberFields: MEMBER_FIELDS,
    headerFields: HEADER_FIELDS,
    removedMessages: REMOVED_MESSAGES,
  });
}

/** etcd 3.4 and 3.5: one learner, no flag to change that, grpc-gateway v1's error body. */
const UP_TO_3_5: SharedTraits = { maxLearnersFlag: null, defaultMaxLearners: 1, errorBodyFields: ["error", "message", "code"], statusExtraFields: [] };
/** etcd 3.6 and later: --max-learners, grpc-gateway v2's error body, the storage fields in status. */
const FROM_3_6: SharedTraits = {
  maxLearnersFlag: "--max-learners",
  defaultMaxLearners: 1,
  errorBodyFields: ["code", "message"],
  statusExtraFields: ["storageVersion", "dbSizeQuota", "downgradeInfo"],
};
const REFUSED_3_5 = { "--max-learners": NO_MAX_LEARNERS, "--experimental-max-learners": NO_MAX_LEARNERS };
const REFUSED_3_6 = {
  "--experimental-max-learners": NO_EXPERIMENTAL_MAX_LEARNERS,
  "--enable-v2": "etcd 3.6 removed the v2 API and --enable-v2",
};

const TABLE: Readonly<Record<EtcdMinor, EtcdTraits>> = {
  "3.4": traits("3.4", { ...UP_TO_3_5, refusedFlags: { ...REFUSED_3_5, "--experimental-compact-hash-check-enabled": "etcd 3.5 added it" } }),
  "3.5": traits("3.5", { ...UP_TO_3_5, refusedFlags: REFUSED_3_5 }),
  "3.6": traits("3.6", { ...FROM_3_6, refusedFlags: REFUSED_3_6 }),
  "3.7": traits("3.7", {
    ...FROM_3_6,
    refusedFlags: { ...REFUSED_3_6, "--experimental-compact-hash-check-enabled": "etcd 3.7 removed it: use --feature-gates=CompactHashCheck=true" },
  }),
};

export function etcdTraits(minor: EtcdMinor): EtcdTraits {
  const t = TABLE[minor];
  if (!t) throw new Error(`unsupported etcd version ${String(minor)}: supported are ${ETCD_MINORS.join(", ")}`);
  return t;
}

/**
 * The table's minor version for a release ("3.6.16" → "3.6"). A release newer than the newest
 * entry gets the newest entry (etcd keeps its refusal texts and flags from one minor to the next;
 * the newest known behaviour is the best guess); older than 3.4 is unsupported (null).
 */
export function minorOf(version: string): EtcdMinor | null {
  const m = /^v?(\d+)\.(\d+)(?:\.\d+)?/.exec(version.trim());
  if (!m) return null;
  const major = Number(m[1]);
  const minor = Number(m[2]);
  const exact = `${major}.${minor}` as EtcdMinor;
  if (ETCD_MINORS.includes(exact)) return exact;
  const newest = ETCD_MINORS[ETCD_MINORS.length - 1]!;
  const [nMajor, nMinor] = newest.split(".").map(Number) as [number, number];
  return major > nMajor || (major === nMajor && minor > nMinor) ? newest : null;
}

/** `etcd --version`'s output → the release and its table entry. Throws for what it cannot read or support. */
export function parseEtcdVersion(output: string): { version: string; minor: EtcdMinor } {
  const version = /etcd Version:\s*(\d+\.\d+\.\d+[^\s]*)/.exec(output)?.[1];
  if (!version) throw new Error(`cannot read etcd's version from: ${output.trim().split("\n")[0] ?? "(nothing)"}`);
  const minor = minorOf(version);
  if (!minor) throw new Error(`etcd ${version} is not supported: supported are ${ETCD_MINORS.join(", ")}`);
  return { version, minor };
}

/** Runs `etcdBin --version`. Rejects with the reason when it cannot run or is not a supported etcd. */
export async function detectEtcdVersion(etcdBin: string): Promise<{ version: string; minor: EtcdMinor }> {
  const output = await new Promise<string>((ok, fail) => {
    execFile(etcdBin, ["--version"], { timeout: 20_000, encoding: "utf8" }, (error, stdout, stderr) => {
      if (error) fail(new Error(`cannot run '${etcdBin} --version': ${error.message}`));
      else ok(`${stdout}\n${stderr}`);
    });
  });
  return parseEtcdVersion(output);
}

/**
 * The flags that let etcd hold `learners` learners at once: [] for the default limit, the
 * version's flag otherwise. Throws where this version cannot allow that many.
 */
export function maxLearnersArgs(traits: EtcdTraits, learners: number): string[] {
  if (!Number.isInteger(learners) || learners < 1) throw new Error(`a learner limit must be a whole number ≥ 1, not ${learners}`);
  if (learners <= traits.defaultMaxLearners) return [];
  if (!traits.maxLearnersFlag)
    throw new Error(`etcd ${traits.minor} allows ${traits.defaultMaxLearners} learner at a time, not ${learners}: that needs etcd 3.6 or later`);
  return [`${traits.maxLearnersFlag}=${learners}`];
}

/** The first of `args` this version refuses to start with, and why; null when it takes them all. */
export function refusedFlag(traits: EtcdTraits, args: readonly string[]): { flag: string; reason: string } | null {
  for (const arg of args) {
    const name = arg.split("=", 1)[0]!.replace(/^-(?=[^-])/, "--");
    const reason = traits.refusedFlags[name];
    if (reason) return { flag: name, reason };
  }
  return null;
}

/** Every (message, kind) of the table, over all versions, longest message first so a prefix never wins. */
export function knownEtcdMessages(): { message: string; refusal: EtcdRefusal | null; grpcCode: number }[] {
  const seen = new Map<string, { message: string; refusal: EtcdRefusal | null; grpcCode: number }>();
  for (const minor of ETCD_MINORS) {
    const t = TABLE[minor];
    for (const [refusal, e] of Object.entries(t.refusals) as [EtcdRefusal, EtcdErrorEntry][])
      seen.set(e.message, { message: e.message, refusal, grpcCode: e.grpcCode });
    for (const e of Object.values(t.unavailable)) seen.set(e.message, { message: e.message, refusal: null, grpcCode: e.grpcCode });
  }
  return [...seen.values()].sort((a, b) => b.message.length - a.message.length);
}
