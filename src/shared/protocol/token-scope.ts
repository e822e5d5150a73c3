/**
 * Enrollment token scopes (docs/protocol.md, admin `enrollment-tokens`, contract v1.1): which node
 * names a token may ask tickets for (`nodes`, glob patterns) and which hosts their peer URLs may
 * use (`peerHosts`, host names or CIDRs). Pure functions: the admin API validates patterns with
 * them, and the broker checks each ticket request against the token's scope.
 * @module
 */
import { ipv6Groups, isDottedQuad, parseHost, parsePeerUrl } from "./peer-url.ts";

export interface TokenScope {
  /** Glob patterns (`*` any run, `?` one character) a node name must match one of; absent: any node. */
  nodes?: string[];
  /** Host names (`*.` prefix: any subdomain), IP addresses or CIDRs; absent: any host. */
  peerHosts?: string[];
}

export const NODE_GLOB = /^[A-Za-z0-9._*?-]{1,63}$/;

/** Why a `peerHosts` entry is not a host name, IP address or CIDR, or null. */
export function peerHostPatternProblem(pattern: string): string | null {
  if (parseCidr(pattern)) return null;
  const name = pattern.startsWith("*.") ? pattern.slice(2) : pattern;
  const host = parseHost(name);
  if (host.ok && host.host === name.toLowerCase() && (host.kind === "dns" || !pattern.startsWith("*."))) return null;
  return `${JSON.stringify(pattern)} is not a host name, "*." followed by a domain, an IP address or a CIDR (10.0.0.0/24, fd00::/8)`;
}

/** Why a request for `node` with `peerURL` is outside the scope, or null when it is inside. */
export function scopeProblem(scope: TokenScope, node: string, peerURL: string): string | null {
  if (scope.nodes && !scope.nodes.some((p) => globMatches(p, node))) {
    return `node ${node} matches none of the token's node patterns (${scope.nodes.join(", ")})`;
  }
  if (scope.peerHosts) {
    const parsed = parsePeerUrl(peerURL);
    const host = parsed.ok ? parsed.value.host : null;
    if (host === null || !scope.peerHosts.some((p) => hostMatches(p, host))) {
      return `peerURL ${peerURL} uses a host outside the token's peer hosts (${scope.peerHosts.join(", ")})`;
    }
  }
  return null;
}

export function globMatches(pattern: string, value: string): boolean {
  const source = pattern
    .replace(/[.+^${}()|[\]\\-]/g, "\\$&")
    .replaceAll("*", ".*")
    .replaceAll("?", ".");
  return new RegExp(`^${source}$`).test(value);
}

/** `host` is a canonical host (lower case, IPv6 in brackets). */
export function hostMatches(pattern: string, host: string): boolean {
  const bare = host.startsWith("[") ? host.slice(1, -1) : host;
  const cidr = parseCidr(pattern);
  if (cidr) {
    const address = addressBits(bare);
    return address !== null && address.family === cidr.family && (address.bits ^ cidr.bits) >> BigInt(cidr.width - cidr.prefix) === 0n;
  }
  const p = pattern.toLowerCase();
  if (p.startsWith("*.")) return bare.endsWith(p.slice(1)) && bare.length > p.length - 1;
  return bare === p;
}

interface Cidr {
  family: 4 | 6;
  bits: bigint;
  width: 32 | 128;
  prefix: number;
}

/** An IP address (a /32 or /128) or a CIDR; null for anything else. */
export function parseCidr(text: string): Cidr | null {
  const [address, length, ...rest] = text.split("/");
  if (rest.length > 0) return null;
  const a = addressBits(address.startsWith("[") && address.endsWith("]") ? address.slice(1, -1) : address);
  if (!a) return null;
  const width = a.family === 4 ? 32 : 128;
  if (length === undefined) return { ...a, width, prefix: width };
  if (!/^(0|[1-9][0-9]{0,2})$/.test(length) || Number(length) > width) return null;
  return { ...a, width, prefix: Number(length) };
}

function addressBits(text: string): { family: 4 | 6; bits: bigint } | null {
  if (isDottedQuad(text)) return { family: 4, bits: text.split(".").reduce((acc, o) => (acc << 8n) | BigInt(o), 0n) };
  if (!text.includes(":")) return null;
  const groups = ipv6Groups(text);
  return groups ? { family: 6, bits: groups.reduce((acc, g) => (acc << 16n) | BigInt(g), 0n) } : null;
}
