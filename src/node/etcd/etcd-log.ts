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
