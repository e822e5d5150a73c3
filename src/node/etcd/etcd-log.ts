/**
 * etcd's own words for why it stopped, read from what it logged (zap's JSON lines, which the
 * agent asks every version for): the last fatal or panic entry's message and error, e.g.
 * "discovery failed: listen tcp 127.0.0.1:2379: bind: address already in use".
 * @module
 */

/** Entries that end etcd, then plain errors: the first kind found, last entry first. */
const LEVELS = [["fatal", "panic", "dpanic"], ["error"]] as const;
const MAX_CHARS = 400;

/**
 * The reason etcd gave for stopping, or null when its log says none. Past `maxChars` it is cut in
 * the middle: etcd puts its conclusion last ("…: member count is unequal"), after a member dump
 * that grows with the cluster.
 */
export function etcdError(log: string, maxChars = MAX_CHARS): string | null {
  const entries: { level: string; text: string }[] = [];
  for (const line of log.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      const e = JSON.parse(line) as Record<string, unknown>;
      const msg = typeof e.msg === "string" ? e.msg : "";
      const error = typeof e.error === "string" ? e.error : "";
      if (typeof e.level === "string" && (msg || error)) entries.push({ level: e.level, text: msg && error ? `${msg}: ${error}` : msg || error });
    } catch {
      // a line cut in half (the tail of a bigger log), or not etcd's
    }
  }
  for (const levels of LEVELS) {
    const found = entries.findLast((e) => (levels as readonly string[]).includes(e.level));
    if (found) return shorten(found.text, maxChars);
  }
  return null;
}

function shorten(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const tail = Math.floor(maxChars / 3);
  return `${text.slice(0, maxChars - tail - 1)}…${text.slice(-tail)}`;
}

/**
 * A TLS handshake that etcd logged as failed over a certificate: on its client or peer port
 * ("rejected connection …"; etcd 3.4 does not say which port), or on a connection it made to a
 * peer (e.g. "failed to get cluster response" while a new member fetches the member list).
 */
export interface EtcdTlsRejection {
  at: "client port" | "peer port" | "client or peer port" | "a peer";
  /** The other end: its address (host:port), or the URL etcd asked. */
  remote: string;
  /** etcd's words. */
  error: string;
  /** "etcd": etcd refused the other end's certificate; "remote": the other end refused etcd's ("remote error: tls: …"). */
  refusedBy: "etcd" | "remote";
  /** Refused for a validity period (a clock may be wrong), not for who signed it or what it names. */
  expiry: boolean;
  /** etcd's timestamp, as logged. */
  ts: string;
}

/** Errors about a certificate, in Go's words (crypto/tls, crypto/x509) as etcd logs them. */
const CERTIFICATE_ERROR =
  /x509: |tls: failed to verify|tls: client didn't provide a certificate|tls: certificate required|remote error: tls: (bad certificate|unknown certificate authority|certificate required|unsupported certificate|revoked certificate|unknown certificate|expired certificate)/;
const EXPIRY = /certificate has expired or is not yet valid|expired certificate/;

/** Every certificate refusal in these lines of etcd's log (zap JSON), oldest first. */
export function etcdTlsRejections(log: string): EtcdTlsRejection[] {
  const out: EtcdTlsRejection[] = [];
  for (const line of log.split("\n")) {
    if (!line.startsWith("{") || !CERTIFICATE_ERROR.test(line)) continue;
    let e: Record<string, unknown>;
    try {
      e = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue;
    }
    const error = typeof e.error === "string" ? e.error : "";
    const msg = typeof e.msg === "string" ? e.msg : "";
    if (!CERTIFICATE_ERROR.test(error)) continue;
    const refusedBy = /remote error: tls:/.test(error) ? "remote" : "etcd";
    const ts = typeof e.ts === "string" ? e.ts : "";
    const expiry = EXPIRY.test(error);
    if (msg.startsWith("rejected connection")) {
      const at = msg.includes("client endpoint") ? "client port" : msg.includes("peer endpoint") ? "peer port" : "client or peer port";
      out.push({ at, remote: String(e["remote-addr"] ?? "?"), error, refusedBy, expiry, ts });
    } else {
      const remote = e.address ?? e["remote-peer-urls"] ?? e["remote-peer-id"] ?? e.url ?? "?";
      out.push({ at: "a peer", remote: Array.isArray(remote) ? remote.join(",") : String(remote), error, refusedBy, expiry, ts });
    }
  }
  return out;
}

/**
 * How a member caught up, in etcd's own words (counts, which load does not move): whether it was
 * sent a snapshot ("received and saved database snapshot"; on 3.6+ every member joining a cluster
 * whose raft log has passed 100 entries is), whether its first "publish my name" proposal timed
 * out ("failed to publish local member to cluster through raft", followed by a second attempt
 * etcd's request timeout later, 7 s with the agent's flags; a member that found its own publish
 * already inside its snapshot never sees that proposal applied), and how long it took from its
 * first log line to publishing itself.
 */
export interface CatchUpFacts {
  snapshotsReceived: number;
  failedPublishes: number;
  /** Its first log line to "published local member to cluster through raft"; null if it never said so. */
  publishMs: number | null;
}

export const SNAPSHOT_RECEIVED = "received and saved database snapshot";
export const PUBLISH_FAILED = "failed to publish local member to cluster through raft";
export const PUBLISHED = "published local member to cluster through raft";

export function catchUpFacts(log: string): CatchUpFacts {
  let first: number | null = null;
  let published: number | null = null;
  let snapshotsReceived = 0;
  let failedPublishes = 0;
  for (const line of log.split("\n")) {
    if (!line.startsWith("{")) continue;
    let e: { ts?: unknown; msg?: unknown };
    try {
      e = JSON.parse(line) as { ts?: unknown; msg?: unknown };
    } catch {
      continue;
    }
    const at = typeof e.ts === "string" ? Date.parse(e.ts) : typeof e.ts === "number" ? e.ts * 1000 : NaN;
    if (first === null && Number.isFinite(at)) first = at;
    if (e.msg === SNAPSHOT_RECEIVED) snapshotsReceived++;
    else if (e.msg === PUBLISH_FAILED) failedPublishes++;
    else if (e.msg === PUBLISHED && published === null && Number.isFinite(at)) published = at;
  }
  return { snapshotsReceived, failedPublishes, publishMs: first !== null && published !== null ? published - first : null };
}
