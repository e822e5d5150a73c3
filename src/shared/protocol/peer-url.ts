/**
 * Peer URLs, parsed strictly and written one way (docs/protocol.md, "Identifiers", contract v1.1).
 *
 * The broker, the node agent and the join API all use this one parser, so a peer URL is stored,
 * signed (`peer_url`) and compared only in its canonical form: `scheme://host:port`, with the
 * scheme and host lower-cased and nothing else. A lenient parser (WHATWG `new URL`) would accept
 * `0177.0.0.1`, `2130706433`, `http:/host:1` or a leading space and rewrite them; two spellings of
 * one address could then hold two tickets or add two etcd members.
 * @module
 */

export interface PeerUrl {
  scheme: "http" | "https";
  /** Lower-cased; an IPv6 address in brackets, compressed as RFC 5952 writes it. */
  host: string;
  hostKind: "dns" | "ipv4" | "ipv6";
  port: number;
  /** `scheme://host:port` */
  canonical: string;
}

export type PeerUrlResult = { ok: true; value: PeerUrl } | { ok: false; problem: string };

const MAX_LENGTH = 512;
const SHAPE = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/(\[[^\]]*\]|[^/:[\]]*)(?::([^/]*))?(\/?)$/;
const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const DECIMAL_OCTET = /^(0|[1-9][0-9]{0,2})$/;
const PORT = /^[1-9][0-9]{0,4}$/;

/** Parses a peer URL strictly; the problem says what is wrong, in words for a 400's detail. */
export function parsePeerUrl(value: string): PeerUrlResult {
  const bad = (problem: string): PeerUrlResult => ({ ok: false, problem });
  if (typeof value !== "string") return bad("must be a string");
  if (value.length > MAX_LENGTH) return bad(`must be at most ${MAX_LENGTH} characters`);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this test refuses (C0, DEL and C1)
  if (/[\s\u0000-\u001f\u007f-\u009f]/.test(value)) return bad("must not contain whitespace or control characters");
  if (/[^\x21-\x7e]/.test(value)) return bad("must be ASCII (write an internationalized host name in punycode)");
  if (value.includes("?")) return bad("must not have a query");
  if (value.includes("#")) return bad("must not have a fragment");
  const authorityStart = value.indexOf("://");
  if (authorityStart < 0) return bad("is not an absolute URL of the form scheme://host:port");
  if (
    value
      .slice(authorityStart + 3)
      .split("/")[0]
      .includes("@")
  )
    return bad("must not carry userinfo");
  const m = SHAPE.exec(value);
  if (!m) {
    const rest = value.slice(authorityStart + 3);
    if (/^[^/]*\/./.test(rest)) return bad("must not have a path");
    return bad("is not of the form scheme://host:port");
  }
  const [, rawScheme, rawHost, rawPort] = m;
  const scheme = rawScheme.toLowerCase();
  if (scheme !== "http" && scheme !== "https") return bad("must use http or https");
  if (rawPort === undefined) return bad("must name a port");
  if (!PORT.test(rawPort) || Number(rawPort) > 65535) return bad("must name a port from 1 to 65535, without leading zeros");
  const host = parseHost(rawHost);
  if (!host.ok) return bad(host.problem);
  const port = Number(rawPort);
  return { ok: true, value: { scheme, host: host.host, hostKind: host.kind, port, canonical: `${scheme}://${host.host}:${port}` } };
}

type HostResult = { ok: true; host: string; kind: PeerUrl["hostKind"] } | { ok: false; problem: string };

/** A DNS name, a dotted-quad IPv4 address or a bracketed IPv6 address, lower-cased. */
export function parseHost(raw: string): HostResult {
  if (raw === "") return { ok: false, problem: "must name a host" };
  if (raw.startsWith("[")) {
    const ipv6 = canonicalIpv6(raw.slice(1, -1));
    return ipv6 === null ? { ok: false, problem: "must be a valid IPv6 address inside the brackets (no zone)" } : { ok: true, host: `[${ipv6}]`, kind: "ipv6" };
  }
  const host = raw.toLowerCase();
  const labels = host.split(".");
  const last = labels[labels.length - 1];
  // A name whose last label is a number is an IPv4 address to every URL parser: only the
  // four-decimal-octet spelling is accepted (not 0177.0.0.1, 2130706433, 0x7f.1 or 127.1).
  if (/^[0-9]+$/.test(last) || /^0x[0-9a-f]*$/.test(last)) {
    return isDottedQuad(host)
      ? { ok: true, host, kind: "ipv4" }
      : { ok: false, problem: "must write an IPv4 address as four decimal numbers 0-255 without leading zeros" };
  }
  if (host.length > 253 || !labels.every((l) => DNS_LABEL.test(l))) {
    return {
      ok: false,
      problem: "must name a host: a DNS name (letters, digits, '-', labels of at most 63), a dotted-quad IPv4 address or a bracketed IPv6 address",
    };
  }
  return { ok: true, host, kind: "dns" };
}

export function isDottedQuad(host: string): boolean {
  const parts = host.split(".");
  return parts.length === 4 && parts.every((p) => DECIMAL_OCTET.test(p) && Number(p) <= 255);
}

/** The 8 groups of an IPv6 address (with an optional dotted-quad tail), or null. */
export function ipv6Groups(text: string): number[] | null {
  if (!/^[0-9a-fA-F:.]+$/.test(text)) return null;
  let tail: number[] = [];
  let head = text;
  const lastColon = text.lastIndexOf(":");
  if (text.slice(lastColon + 1).includes(".")) {
    const quad = text.slice(lastColon + 1);
    if (!isDottedQuad(quad)) return null;
    const o = quad.split(".").map(Number);
    tail = [(o[0] << 8) | o[1], (o[2] << 8) | o[3]];
    head = text.slice(0, lastColon + 1);
    if (head.endsWith(":") && !head.endsWith("::")) head = head.slice(0, -1);
  }
  const halves = head.split("::");
  if (halves.length > 2) return null;
  const groups = (s: string) => (s === "" ? [] : s.split(":"));
  const left = groups(halves[0]);
  const right = halves.length === 2 ? groups(halves[1]) : [];
  if (![...left, ...right].every((g) => /^[0-9a-fA-F]{1,4}$/.test(g))) return null;
  const given = left.length + right.length + tail.length;
  if (halves.length === 1 ? given !== 8 : given > 7) return null;
  const fill = new Array(8 - given).fill(0);
  return [...left.map((g) => parseInt(g, 16)), ...fill, ...right.map((g) => parseInt(g, 16)), ...tail];
}

/** RFC 5952: lower case, no leading zeros, the longest run of two or more zero groups as "::". */
export function canonicalIpv6(text: string): string | null {
  const g = ipv6Groups(text);
  if (!g) return null;
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLength) [bestStart, bestLength] = [i, j - i];
    i = j;
  }
  const hex = g.map((n) => n.toString(16));
  if (bestStart < 0) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLength).join(":")}`;
}
