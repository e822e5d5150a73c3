/**
 * Human-readable output for the admin CLI: aligned tables, times with "how long ago / from now",
 * and durations. Plain text only, so the output pastes cleanly into an incident channel.
 * @module
 */
import { memberIdHex } from "../../shared/protocol/member-id.ts";

/** Left-aligned columns separated by two spaces; empty cells print as "-". */
export function table(headers: string[], rows: (string | number | null | undefined)[][]): string {
  const cells = rows.map((r) => headers.map((_, i) => (r[i] === null || r[i] === undefined || r[i] === "" ? "-" : String(r[i]))));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join("  ");
  return [line(headers), ...cells.map(line)].join("\n") + "\n";
}

/** "key  value" lines with the keys aligned. */
export function fields(pairs: [string, string | number | null | undefined][]): string {
  const width = Math.max(...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${k.padEnd(width)}  ${v === null || v === undefined || v === "" ? "-" : v}`).join("\n") + "\n";
}

/** A span of seconds as "45s", "12m", "3h20m", "2d4h". */
export function duration(seconds: number): string {
  const s = Math.round(Math.abs(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? `${s % 60}s` : ""}`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60) ? `${Math.floor((s % 3600) / 60)}m` : ""}`;
  return `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600) ? `${Math.floor((s % 86400) / 3600)}h` : ""}`;
}

/** "in 45s" or "3m ago", relative to `now`. */
export function relative(iso: string | null | undefined, now = Date.now()): string | undefined {
  if (!iso) return undefined;
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return iso;
  const seconds = (ms - now) / 1000;
  if (Math.abs(seconds) < 1) return "now";
  return seconds > 0 ? `in ${duration(seconds)}` : `${duration(seconds)} ago`;
}

/** An RFC 3339 time to the second, UTC, with its relative form: "2026-05-01 09:14:20Z (3m ago)". */
export function when(iso: string | null | undefined, now = Date.now()): string | undefined {
  if (!iso) return undefined;
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return iso;
  return `${new Date(ms).toISOString().slice(0, 19).replace("T", " ")}Z (${relative(iso, now)})`;
}

/**
 * Parses a duration flag: whole seconds ("3600") or units ("90s", "10m", "24h", "7d", "1h30m").
 * Returns null when the text is neither.
 */
export function parseDuration(text: string): number | null {
  if (/^\d+$/.test(text)) return Number(text);
  if (!/^(\d+[smhd])+$/.test(text)) return null;
  const unit: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };
  let total = 0;
  for (const [, n, u] of text.matchAll(/(\d+)([smhd])/g)) total += Number(n) * unit[u];
  return total;
}

/** A compact "k=v k=v" rendering of an audit entry's detail object. */
export function inlineDetail(detail: Record<string, unknown>): string {
  return (
    Object.entries(detail)
      .filter(([, v]) => v !== null && v !== undefined)
      // Member IDs as etcdctl prints them (hex); the JSON keeps the broker's spelling.
      .map(([k, v]) => [k, k === "memberID" && typeof v === "string" ? memberIdHex(v) : v] as const)
      .map(([k, v]) => `${k}=${typeof v === "string" ? (/\s/.test(v) ? JSON.stringify(v) : v) : JSON.stringify(v)}`)
      .join(" ")
  );
}
