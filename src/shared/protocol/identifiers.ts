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

/**
 * Node names no ticket is issued for and no certificate is signed for, compared without case.
 * A node's etcd certificates carry its name as their common name, which etcd (with auth on)
 * takes as the client's user name: `root` is etcd's superuser; `kube-apiserver`,
 * `kube-apiserver-etcd-client` (kubeadm's) and `apiserver-etcd-client` (k0s's) are the users the
 * bootstrap node creates for the API servers' client certificates; `join-broker` is kept for the
 * project's own identities, and `guest` is etcd's other built-in name (its v2 auth). Kubernetes'
 * own names (`system:…`) cannot be node names at all: the pattern has no `:`.
 */
export const RESERVED_NODE_NAMES: readonly string[] = ["root", "guest", "kube-apiserver", "kube-apiserver-etcd-client", "apiserver-etcd-client", "join-broker"];

/** Why this (well-formed) node name cannot be used, or null when it can. */
export function reservedNodeNameProblem(value: string): string | null {
  const reserved = RESERVED_NODE_NAMES.find((r) => r === value.toLowerCase());
  if (!reserved) return null;
  return `node name ${JSON.stringify(value)} is reserved: etcd and this project give ${reserved === "root" ? "the user root every right" : `the name ${reserved} a meaning of its own`} (reserved, without case: ${RESERVED_NODE_NAMES.join(", ")})`;
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
