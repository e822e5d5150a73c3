/**
 * What the console shows, spelled out: durations, clock times, member IDs, audit lines, the
 * cluster a link names and the enrollment-token request the form makes. Pure: no DOM, no clock
 * unless given.
 * @module
 */
import type { AuditEntry } from "../../../shared/protocol/wire.ts";
import { memberIdHex } from "../../../shared/protocol/member-id.ts";

export function duration(ms: number): string {
  if (!(ms >= 0)) ms = 0;
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + String(s % 60).padStart(2, "0") + " s";
  if (s < 86400) return Math.floor(s / 3600) + " h " + String(Math.floor(s / 60) % 60).padStart(2, "0") + " min";
  return Math.floor(s / 86400) + " d " + (Math.floor(s / 3600) % 24) + " h";
}

/** A time of day in the browser's zone, HH:MM:SS. */
export function clock(ms: number): string {
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":");
}

/** A time of day when within the last day, else the UTC date and minute. */
export function when(iso: string | null | undefined, now: number = Date.now()): string {
  if (!iso) return "—";
  const t = Date.parse(iso);
  return now - t < 86400000 ? clock(t) : new Date(t).toISOString().slice(0, 16).replace("T", " ");
}

/** etcd member IDs as etcdctl prints them (hex); the broker stores what the node reported. */
export function memberHex(id: string | null | undefined): string {
  if (!id) return "—";
  return memberIdHex(id).toLowerCase();
}

/** Milliseconds since the epoch, or null for no time at all. */
export function ms(iso: string | null | undefined): number | null {
  return iso ? Date.parse(iso) : null;
}

/** Round times between `start` and `end` for an axis: at most about `count` of them. */
export function niceTicks(start: number, end: number, count: number): number[] {
  const span = end - start;
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400].map((s) => s * 1000);
  const step = steps.find((s) => span / s <= count) ?? steps[steps.length - 1];
  const out: number[] = [];
  for (let t = Math.ceil(start / step) * step; t <= end; t += step) out.push(t);
  return out;
}

/** An audit entry's line: node, subject, role, member, reason, previous state and actor. */
export function auditLine(entry: AuditEntry): string {
  const d = (entry.detail ?? {}) as Record<string, unknown>;
  const parts: string[] = [];
  if (d.node && d.node !== entry.subject) parts.push(String(d.node));
  parts.push(entry.subject);
  if (d.role) parts.push(String(d.role));
  if (d.memberID) parts.push("member " + memberHex(String(d.memberID)));
  if (d.reason) parts.push('"' + String(d.reason) + '"');
  if (d.previousState) parts.push("was " + String(d.previousState));
  parts.push("by " + entry.actor);
  return parts.join(" · ");
}

/** The cluster a link names ('#cluster=NAME'): '' when none, null when it cannot be decoded. */
export function clusterFromHash(hash: string): string | null {
  const m = /(?:^#|&)cluster=([^&]*)/.exec(hash);
  if (!m) return "";
  try {
    return decodeURIComponent(m[1]);
  } catch {
    return null;
  }
}

/** The address part that names a cluster. */
export function clusterHash(cluster: string): string {
  return "#cluster=" + encodeURIComponent(cluster);
}

export interface TokenForm {
  description: string;
  /** The "never expires" box. */
  forever: boolean;
  /** Hours as typed ('' for the default). */
  hours: string;
  /** Uses as typed ('' for unlimited). */
  uses: string;
}

export interface TokenRequest {
  description?: string;
  ttlSeconds?: number;
  maxUses?: number;
}

/** The enrollment-token request the form asks for, and its summary for the confirmation. */
export function tokenRequest(form: TokenForm): { body: TokenRequest; summary: string } {
  const body: TokenRequest = {};
  const description = form.description.trim();
  // 24 h unless changed; a token that never expires is asked for, never a default.
  const hours = form.forever ? "" : form.hours.trim() || "24";
  const uses = form.uses.trim();
  if (description) body.description = description;
  if (hours) body.ttlSeconds = Math.round(Number(hours) * 3600);
  if (uses) body.maxUses = Number(uses);
  const summary =
    (description ? '"' + description + '", ' : "") +
    (form.forever ? "never expires" : "valid for " + hours + " h") +
    ", " +
    (uses ? uses + " use(s)" : "unlimited uses");
  return { body, summary };
}
