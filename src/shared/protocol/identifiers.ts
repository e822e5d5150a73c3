/**
 * Identifiers shared by the broker, the node agent and the join API (docs/protocol.md, "Identifiers").
 * @module
 */
import { parsePeerUrl } from "./peer-url.ts";

export const CLUSTER_PATTERN = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
export const NODE_PATTERN = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,62})$/;

export function isClusterName(value: string): boolean {
  return CLUSTER_PATTERN.test(value);
}

export function isNodeName(value: string): boolean {
  return NODE_PATTERN.test(value);
}

/** Why a peer URL is unacceptable, or null when it is fine (the strict parser of peer-url.ts). */
export function peerUrlProblem(value: string): string | null {
  const parsed = parsePeerUrl(value);
  return parsed.ok ? null : parsed.problem;
}

/**
 * The canonical spelling of a peer URL (`scheme://host:port`, lower-cased). A string the strict
 * parser refuses (a URL etcd reports, say) keeps its spelling, minus a trailing slash, so that it
 * never equals a canonical one by accident.
 */
export function canonicalPeerUrl(value: string): string {
  const parsed = parsePeerUrl(value);
  if (parsed.ok) return parsed.value.canonical;
  return value.endsWith("/") ? value.slice(0, -1) : value;
}
